// apps/allreduce_bench/collective.cpp: the five collectives on float32 buffers. Check values are
// small integers (exact in float for any order of summation up to 64 ranks), unique to rank and
// position as gloo's tests do, so a chunk landing at the wrong offset or from the wrong rank
// shows up as wrong elements. On a CUDA device the same values go up before the call and the
// results come back after it.
#include "apps/allreduce_bench/collective.h"

#include <algorithm>
#include <cmath>

#include "apps/allreduce_bench/cuda_env.h"
#include "core/error.h"

namespace engine::allreduce_bench {

CollOp collective_from_name(const std::string& s) {
  for (CollOp c : kCollectives)
    if (s == comm::coll_op_name(c)) return c;
  if (s == comm::coll_op_name(CollOp::AllToAll)) return CollOp::AllToAll;
  ENGINE_FAIL("unknown collective '", s,
              "' (expected all_reduce, broadcast, reduce, all_gather, reduce_scatter, all_to_all "
              "or all)");
}

double busbw_factor(CollOp c, int world) {
  const double n = world;
  switch (c) {
    case CollOp::AllReduce:
      return 2.0 * (n - 1) / n;
    case CollOp::AllGather:
    case CollOp::ReduceScatter:
    case CollOp::AllToAll:
      return (n - 1) / n;
    case CollOp::Broadcast:
    case CollOp::Reduce:
    default:
      return 1.0;
  }
  return 1.0;
}

int64_t total_count(CollOp c, int64_t nbytes, int world) {
  const int64_t count = nbytes / 4;
  if (c == CollOp::AllGather || c == CollOp::ReduceScatter || c == CollOp::AllToAll)
    return count / world * world;
  return count;
}

CollectiveRun::CollectiveRun(CollOp c, comm::Communicator& comm, int64_t count, comm::ReduceOp op,
                             Backend backend)
    : c_(c), comm_(comm), count_(count), chunk_(count / comm.size()), op_(op), backend_(backend) {
  switch (c_) {
    case CollOp::AllGather:
      in_.resize(chunk_);
      out_.resize(count_);
      break;
    case CollOp::ReduceScatter:
      in_.resize(count_);
      out_.resize(chunk_);
      break;
    case CollOp::AllToAll:
      in_.resize(count_);
      out_.resize(count_);
      break;
    default:
      in_.resize(count_);
  }
  if (backend_.device >= 0 && count_ > 0) {  // zeros, as the host vectors start
    const Device dev = Device::cuda(backend_.device);
    din_ = Tensor::zeros({int64_t(in_.size())}, DType::F32, dev);
    if (!out_.empty()) dout_ = Tensor::zeros({int64_t(out_.size())}, DType::F32, dev);
    device_synchronize(backend_.device);
  }
}

// The Tensor overloads of comm::Communicator and comm::NcclGroup have the same shape.
template <class Comm>
void CollectiveRun::run_tensors(Comm& c) {
  switch (c_) {
    case CollOp::AllReduce:
      c.all_reduce(din_, op_);
      break;
    case CollOp::Broadcast:
      c.broadcast(din_, 0);
      break;
    case CollOp::Reduce:
      c.reduce(din_, op_, 0);
      break;
    case CollOp::AllGather:
      c.all_gather(din_, dout_);
      break;
    case CollOp::ReduceScatter:
      c.reduce_scatter(din_, dout_, op_);
      break;
    default:
      ENGINE_FAIL("allreduce_bench: ", comm::coll_op_name(c_), " is not timed");
  }
}

void CollectiveRun::finish() {
  if (backend_.device >= 0) device_synchronize(backend_.device);
}

void CollectiveRun::run() {
  if (backend_.device >= 0) {
    if (count_ == 0) return;
    if (backend_.nccl)
      run_tensors(*backend_.nccl);
    else
      run_tensors(comm_);
    return;
  }
  constexpr DType f32 = DType::F32;
  switch (c_) {
    case CollOp::AllReduce:
      comm_.all_reduce(in_.data(), count_, f32, op_);
      break;
    case CollOp::Broadcast:
      comm_.broadcast(in_.data(), count_, f32, 0);
      break;
    case CollOp::Reduce:
      comm_.reduce(in_.data(), count_, f32, op_, 0);
      break;
    case CollOp::AllGather:
      comm_.all_gather(in_.data(), out_.data(), chunk_, f32);
      break;
    case CollOp::ReduceScatter:
      comm_.reduce_scatter(in_.data(), out_.data(), chunk_, f32, op_);
      break;
    case CollOp::AllToAll:
      comm_.all_to_all(in_.data(), out_.data(), chunk_, f32);
      break;
    default:
      ENGINE_FAIL("allreduce_bench: ", comm::coll_op_name(c_), " is not timed");
  }
}

float CollectiveRun::value(int rank, int64_t i) const {
  if (op_ == comm::ReduceOp::Prod) return static_cast<float>(1 + (i + rank) % 3);
  return static_cast<float>((i % 4093) * 64 + rank);  // 4093: a prime period
}

float CollectiveRun::expected_reduction(int64_t i) const {
  const int w = comm_.size();
  double acc = value(0, i);
  for (int q = 1; q < w; ++q) {
    double v = value(q, i);
    switch (op_) {
      case comm::ReduceOp::Sum:
      case comm::ReduceOp::Avg:
        acc += v;
        break;
      case comm::ReduceOp::Prod:
        acc *= v;
        break;
      case comm::ReduceOp::Max:
        acc = std::max(acc, v);
        break;
      case comm::ReduceOp::Min:
        acc = std::min(acc, v);
        break;
    }
  }
  if (op_ == comm::ReduceOp::Avg) return static_cast<float>(acc) / static_cast<float>(w);
  return static_cast<float>(acc);
}

int64_t CollectiveRun::count_wrong(const float* got, int64_t n,
                                   const std::vector<float>& want) const {
  // Exact, but AVG's division may round either way of the float quotient.
  const double tol = op_ == comm::ReduceOp::Avg ? 1e-6 : 0.0;
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i)
    if (!(std::fabs(double(got[i]) - want[i]) <= tol * std::fabs(double(want[i])))) ++wrong;
  return wrong;
}

int64_t CollectiveRun::check() {
  const int r = comm_.rank(), w = comm_.size();
  for (int64_t i = 0; i < int64_t(in_.size()); ++i) in_[i] = value(r, i);
  std::fill(out_.begin(), out_.end(), -1.f);
  const bool on_device = backend_.device >= 0 && count_ > 0;
  if (on_device) {
    din_.copy_from(Tensor::from_vector(in_, {int64_t(in_.size())}));
    if (dout_.defined()) dout_.copy_from(Tensor::from_vector(out_, {int64_t(out_.size())}));
    device_synchronize(backend_.device);
  }
  run();
  if (on_device) {
    finish();
    in_ = din_.to_vector();
    if (dout_.defined()) out_ = dout_.to_vector();
  }

  std::vector<float> want;
  const float* got = in_.data();
  switch (c_) {
    case CollOp::AllReduce:
      for (int64_t i = 0; i < count_; ++i) want.push_back(expected_reduction(i));
      break;
    case CollOp::Broadcast:
      for (int64_t i = 0; i < count_; ++i) want.push_back(value(0, i));
      break;
    case CollOp::Reduce:  // the root gets the reduction; the others keep their input
      for (int64_t i = 0; i < count_; ++i)
        want.push_back(r == 0 ? expected_reduction(i) : value(r, i));
      break;
    case CollOp::AllGather:  // rank q's chunk holds value(q, 0..chunk)
      for (int q = 0; q < w; ++q)
        for (int64_t i = 0; i < chunk_; ++i) want.push_back(value(q, i));
      got = out_.data();
      break;
    case CollOp::ReduceScatter:  // this rank's chunk of the reduction
      for (int64_t i = 0; i < chunk_; ++i) want.push_back(expected_reduction(r * chunk_ + i));
      got = out_.data();
      break;
    case CollOp::AllToAll:  // chunk q comes from rank q's chunk r
      for (int q = 0; q < w; ++q)
        for (int64_t i = 0; i < chunk_; ++i) want.push_back(value(q, r * chunk_ + i));
      got = out_.data();
      break;
    default:
      ENGINE_FAIL("allreduce_bench: ", comm::coll_op_name(c_), " is not checked");
  }
  return count_wrong(got, int64_t(want.size()), want);
}

}  // namespace engine::allreduce_bench
