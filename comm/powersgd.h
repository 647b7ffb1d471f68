// comm/powersgd.h: PowerSGD gradient compression (Vogels et al., 2019), as PyTorch's
// powerSGD_hook: each matrix-shaped gradient M (rows = dim 0, cols = the rest) travels as two
// small matrices of rank R instead of rows x cols values.
//
// One step, every rank (W ranks), after backward:
//   vectors, and matrices compression would not halve   one all_reduce (avg), uncompressed
//   M = grad + error                                      error feedback (zeros at first)
//   P = M Q              (rows x R)                       Q: last step's (warm start), at first
//                                                         uniform in [-1, 1) from a seed shared by
//                                                         every rank, orthogonalised
//   P = all_reduce_sum(P), orthogonalised (Gram-Schmidt on its columns)
//   Q = M^T P            (cols x R)
//   Q = all_reduce_sum(Q)
//   grad = P Q^T / W;  error = M - grad
// Every P travels in one all_reduce, every Q in another. Before step `start` (--powersgd-start)
// every gradient is averaged uncompressed and no error accumulates, as PyTorch's
// start_powerSGD_iter. On CUDA tensors the matrices are computed on the host.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/grad_sync.h"

namespace engine::comm {

class PowerSgd : public GradReducer {
 public:
  // params: the model's (name, parameter) pairs; rank: R >= 1; start: the first compressed step.
  PowerSgd(Communicator& comm, NamedParams params, int rank, int64_t start, uint64_t seed);

  // After backward of optimizer step `step` (0-based): every parameter's grad becomes the
  // (approximate) mean over ranks. A parameter without a gradient counts as zeros.
  void reduce(int64_t step);

  // The compression state for a checkpoint; every rank calls it, rank 0 gets it all (empty
  // elsewhere): "<param>.powersgd_q" (cols x R, equal on every rank) and, per rank r, its error
  // feedback "<param>.powersgd_error.rank<r>" (the parameter's shape), once they exist.
  NamedParams gather_state() override;
  // Restores this rank's part of gather_state()'s (entries it lacks stay fresh: a checkpoint of
  // another world size restarts the error feedback); throws on a size that does not fit.
  void load_state(const NamedParams& state) override;

  // Bytes this rank's ring sends in one reduce at `step`: 2 (W - 1) / W of each all_reduce.
  int64_t bytes_per_step(int64_t step) const override;
  void begin(int64_t step) override { step_ = step; }
  void finish() override { reduce(step_); }
  std::string name() const override { return "powersgd:" + std::to_string(rank_); }
  // Number of parameters compressed (matrices where R saves at least half).
  size_t compressed_count() const { return matrices_.size(); }

 private:
  struct Matrix {
    size_t param;
    int64_t rows, cols;
    std::vector<float> error, q, p;  // (rows x cols), (cols x R), (rows x R); row-major
    bool has_q = false;
  };
  void reduce_uncompressed(const std::vector<size_t>& which);
  void init_q(Matrix& m);

  Communicator& comm_;
  NamedParams params_;
  int rank_;
  int64_t start_;
  uint64_t seed_;
  int64_t step_ = 0;  // begin()'s, for finish()
  std::vector<Matrix> matrices_;
  std::vector<size_t> vectors_;  // indices of parameters that travel uncompressed
};

}  // namespace engine::comm
