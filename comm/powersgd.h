// comm/powersgd.h: PowerSGD gradient compression (Vogels et al., 2019), as PyTorch's
// powerSGD_hook: each matrix-shaped gradient M (rows = dim 0, cols = the rest) travels as two
// small matrices of rank R instead of rows x cols values.
//
// Per bucket, while backward runs: the Bucketed engine of comm/grad_sync.h (same layout, same
// hooks) whose bucket work, on the communication thread as soon as the bucket's last gradient is
// final, is (W ranks):
//   the bucket's vectors, and matrices compression would not halve   one all_reduce (avg)
//   M = grad + error                                   error feedback (zeros at first)
//   P = M Q              (rows x R)                    Q: last step's (warm start), at first
//                                                      uniform in [-1, 1) from a seed shared by
//                                                      every rank, orthogonalised
//   P = all_reduce_sum(P), orthogonalised (Gram-Schmidt on its columns)
//   Q = M^T P            (cols x R)
//   Q = all_reduce_sum(Q)
//   grad = P Q^T / W;  error = M - grad
// Every P of a bucket travels in one all_reduce, every Q in another. Before step `start` every
// gradient is averaged uncompressed and no error accumulates, as PyTorch's start_powerSGD_iter.
// On CUDA tensors the buckets and the matrices live on the host.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "comm/communicator.h"
#include "comm/grad_sync.h"

namespace engine::comm {

class PowerSgdCodec;

class PowerSgd : public GradSync {
 public:
  // params: the model's (name, parameter) pairs; rank: R >= 1; start: the first compressed step;
  // bucket_bytes caps a bucket (of float32 gradients).
  PowerSgd(Communicator& comm, NamedParams params, int rank, int64_t start, uint64_t seed,
           size_t bucket_bytes = kDefaultBucketBytes);

  // begin(step) then finish(), for optimizer step `step` (0-based): every parameter's grad
  // becomes the (approximate) mean over ranks. A parameter without a gradient counts as zeros.
  void reduce(int64_t step);

  // The compression state for a checkpoint; every rank calls it, rank 0 gets it all (empty
  // elsewhere): "<param>.powersgd_q" (cols x R, equal on every rank) and, per rank r, its error
  // feedback "<param>.powersgd_error.rank<r>" (the parameter's shape), once they exist.
  NamedParams gather_state() override;
  // Restores this rank's part of gather_state()'s (entries it lacks stay fresh: a checkpoint of
  // another world size restarts the error feedback); throws on a size that does not fit.
  void load_state(const NamedParams& state) override;

  // Number of parameters compressed (matrices where R saves at least half).
  size_t compressed_count() const;

 private:
  PowerSgdCodec& codec() const;
};

}  // namespace engine::comm
