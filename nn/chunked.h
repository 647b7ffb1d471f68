// nn/chunked.h: the chunked-gradient mode, so that a data-parallel step has the same gradient bits
// at every world size (issue 35). A global batch of B samples is cut into chunks of a fixed size
// (core/chunk_tree.h); a rank holds a contiguous run of whole chunks. While a ChunkedGradients is
// in scope on a thread, the ops of nn/functional.h that thread records behave as follows:
//   - linear and conv2d compute their weight and bias gradients on each chunk alone (the kernel
//     called on that chunk, beta 0) and push each chunk's partial into a per-parameter
//     chunk_tree::Accumulator instead of returning a gradient: after backward, take(param) gives
//     the parameter's tree nodes, what Communicator::chunk_tree_all_reduce takes;
//   - nll_loss (and so cross_entropy) scales its gradient by the global 1/B, and keeps each
//     chunk's sum of per-sample losses in the same tree (take_loss());
//   - dropout and dropout2d draw by global position (kernels/dropout.h: the generator reserves
//     the whole batch's counters on every rank, the call starts at the rank's first sample).
// The ops hand autograd no weight or bias gradient (a parameter's .grad stays as it was: the step
// writes the tree's root there) and the loss stays the share's mean; backward must run inside the
// scope the forward ran in (checked). A parameter used twice in one forward is refused by its
// accumulator (its chunks would come twice).
//   - BatchNorm2d in training normalises over the global batch (nn/sync_batch_norm.h): each
//     chunk's sums go through tree_sum(), and gamma's and beta's gradients into the tree.
//   - under bf16 matmul precision, linear and conv2d take the batch-invariant bf16 schedules
//     (kernels/cpu/bf16_ops.h), on the CPU only (refused with one line on a GPU).
// Input gradients and forwards need nothing more: the fp32 kernels are batch invariant. The loss
// and BatchNorm run on the CPU only. Without
// a ChunkedGradients (the default) the ops run as before, bit for bit.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "core/chunk_tree.h"
#include "core/tensor.h"

namespace engine::nn {

// The part of a global batch this rank computes.
struct ChunkPlan {
  int64_t chunk_size = 16;   // samples per chunk (the last chunk of the batch may be shorter)
  int64_t global_batch = 0;  // B, the samples of the whole step on all ranks
  int64_t first_chunk = 0;   // this rank's first chunk of the global batch
  int64_t first_sample() const { return first_chunk * chunk_size; }
};

// A parameter's (or the loss's) partial sums: tree nodes in leaf order, each with its sum.
using TreeNodes = std::vector<std::pair<chunk_tree::Node, Tensor>>;
// Per-chunk sums of doubles (BatchNorm's statistics): this rank's nodes; and what sums every
// rank's nodes of a tree of `leaves` leaves into the root, on every rank (the step sets it:
// parallel/tree_reducer.h over the ranks' chunk_tree_all_reduce).
using DoubleNodes = std::vector<std::pair<chunk_tree::Node, std::vector<double>>>;
using TreeSum = std::function<std::vector<double>(size_t leaves, DoubleNodes nodes)>;

// One chunk of a rank's share: its index in the global batch, its rows in the rank's tensors.
struct LocalChunk {
  size_t global = 0;
  int64_t begin = 0, count = 0;
};

class ChunkedGradients {
 public:
  // Makes this the calling thread's mode until destruction (scopes nest; the inner one wins).
  explicit ChunkedGradients(const ChunkPlan& plan);
  ~ChunkedGradients();
  ChunkedGradients(const ChunkedGradients&) = delete;
  ChunkedGradients& operator=(const ChunkedGradients&) = delete;

  // The calling thread's mode; null in the default.
  static ChunkedGradients* current();

  const ChunkPlan& plan() const { return plan_; }
  size_t chunks() const { return chunks_; }  // in the global batch: the tree's leaves

  // The chunks of a share of `rows` samples starting at the plan's first chunk; throws naming
  // `op` when the share is not whole chunks of the global batch.
  std::vector<LocalChunk> local_chunks(const char* op, int64_t rows) const;

  // Adds chunk `global`'s partial to param's tree (chunks in increasing order per parameter).
  void push(const Tensor& param, size_t global, Tensor partial);
  void push_loss(size_t global, Tensor partial);

  // The nodes pushed for param (or the loss), leaving none; throws naming it when none were.
  TreeNodes take(const Tensor& param, const char* name = "parameter");
  TreeNodes take_loss();

  // The sum over the global batch of `width` doubles per chunk: sums(chunk, out) adds the
  // chunk's rows of the share into out (width zeros), chunk by chunk in order; every rank calls
  // it in the same order. Through set_tree_sum's function; unset, the nodes are folded here
  // (one process: they cover every chunk).
  std::vector<double> sum_over_batch(
      const char* op, int64_t rows, size_t width,
      const std::function<void(const LocalChunk& chunk, double* out)>& sums) const;
  void set_tree_sum(TreeSum f) { tree_sum_ = std::move(f); }

 private:
  struct AddInto {
    void operator()(Tensor& a, const Tensor& b) const { a.add_(b); }
  };
  using Acc = chunk_tree::Accumulator<Tensor, AddInto>;
  Acc& acc(const void* key);
  TreeNodes take(const void* key, const char* name);

  ChunkPlan plan_;
  size_t chunks_;
  std::map<const void*, Acc> accs_;  // keyed by the parameter's storage (the loss: by this)
  TreeSum tree_sum_;
  ChunkedGradients* previous_;
};

}  // namespace engine::nn
