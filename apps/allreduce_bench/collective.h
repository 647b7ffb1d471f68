// apps/allreduce_bench/collective.h: owns one rank's buffers for one collective at one size and
// dtype, the call that is timed (out of place or in place, as nccl-tests time both), and the
// correctness pass (values unique to rank and position).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "comm/backends/nccl/nccl_group.h"
#include "comm/base/frame.h"
#include "comm/communicator.h"
#include "core/tensor.h"

namespace engine::allreduce_bench {

using comm::CollOp;

// The collectives this benchmark times, in --collective all's order; comm::coll_op_name gives
// their names ("all_reduce", ...).
constexpr CollOp kCollectives[] = {CollOp::AllReduce, CollOp::Broadcast, CollOp::Reduce,
                                   CollOp::AllGather, CollOp::ReduceScatter};

// Named alone (--collective all_to_all, chunk_tree_all_reduce), not in `all`: all_to_all and
// the sum over the fixed chunk tree with one chunk per rank (comm/communicator.h).
CollOp collective_from_name(const std::string& s);  // engine::Error for an unknown name

// nccl-tests' bus bandwidth factors: all_reduce (and the chunk tree's, which moves as many bytes
// with one chunk per rank) 2(n-1)/n; all_gather, reduce_scatter and all_to_all (n-1)/n of the
// total size; broadcast and reduce 1.
double busbw_factor(CollOp c, int world);

// Elements of the size column: nbytes / the dtype's size, for all_gather, reduce_scatter and
// all_to_all rounded down to a multiple of the world size (the size is the gathered / scattered /
// exchanged total, as nccl-tests').
int64_t total_count(CollOp c, int64_t nbytes, int world, DType dt = DType::F32);

// nccl-tests' name of a dtype in the type column: float, bfloat16, half, int32, int64, uint8.
const char* type_column_name(DType dt);

// Where a rank's buffers live and what moves them.
struct Backend {
  int device = -1;  // -1: host memory (raw-buffer calls); else this rank's CUDA device
  // With a device: NCCL when set, else the Communicator's Tensor overloads on CUDA tensors.
  comm::NcclGroup* nccl = nullptr;
};

class CollectiveRun {
 public:
  // count: total_count(); root 0 for broadcast and reduce.
  CollectiveRun(CollOp c, comm::Communicator& comm, int64_t count, comm::ReduceOp op,
                Backend backend = {}, DType dtype = DType::F32);

  // Out of place (in_place false) or in place, as nccl-tests: all_reduce, broadcast and reduce
  // out of place copy the input into the output buffer and run there (our calls work in place);
  // all_gather in place passes its slot of the output as the input, reduce_scatter in place its
  // slot of the input as the output.
  void set_in_place(bool in_place) { in_place_ = in_place; }
  // The collective once: what is timed. On a device a call of no elements is not made (nothing
  // to move; every rank skips it alike).
  void run();
  // Waits until the device has finished what run() queued (a no-op on the host): the timing
  // reads the clock after it.
  void finish();

  // Fills the inputs with check values, runs once, returns this rank's wrong elements.
  int64_t check();

 private:
  // Unique to rank and position where the dtype allows, and exact in it for any order of
  // combining: small enough that sums over the ranks stay exact (uint8 wraps alike everywhere).
  double value(int rank, int64_t i) const;
  double expected_reduction(int64_t i) const;
  int64_t count_wrong(const std::byte* got, const std::vector<double>& want) const;
  template <class Comm>
  void run_tensors(Comm& c);
  void run_host();
  std::byte* at(std::vector<std::byte>& v, int64_t i) { return v.data() + i * es_; }

  CollOp c_;
  comm::Communicator& comm_;
  int64_t count_, chunk_;  // chunk_: per-rank share for all_gather / reduce_scatter / all_to_all
  comm::ReduceOp op_;
  Backend backend_;
  DType dt_;
  size_t es_;
  bool in_place_ = true;
  std::vector<std::byte> in_, out_;  // out_: every collective's output buffer (out of place)
  Tensor din_, dout_;                // on backend_.device (undefined on the host, or when empty)
};

}  // namespace engine::allreduce_bench
