// apps/allreduce_bench/collective.cpp: the five collectives on buffers of any dtype, out of place
// and in place. Check values are small integers, exact in the dtype for any order of combining,
// unique to rank and position as gloo's tests do (as far as the dtype's exact range allows), so a
// chunk landing at the wrong offset or from the wrong rank shows up as wrong elements. On a CUDA
// device the same values go up before the call and the results come back after it.
#include "apps/allreduce_bench/collective.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "apps/allreduce_bench/cuda_env.h"
#include "core/error.h"
#include "kernels/half.h"

namespace engine::allreduce_bench {

namespace {

void put(DType dt, std::byte* p, double v) {
  switch (dt) {
    case DType::F32: {
      const float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      return;
    }
    case DType::BF16:
    case DType::F16: {
      const float f = static_cast<float>(v);
      const uint16_t h = dt == DType::BF16 ? kernels::bf16_from_f32(f) : kernels::f16_from_f32(f);
      std::memcpy(p, &h, 2);
      return;
    }
    case DType::I32: {
      const auto i = static_cast<int32_t>(v);
      std::memcpy(p, &i, 4);
      return;
    }
    case DType::I64: {
      const auto i = static_cast<int64_t>(v);
      std::memcpy(p, &i, 8);
      return;
    }
    case DType::U8:
      *p = static_cast<std::byte>(static_cast<int64_t>(v) & 0xFF);
      return;
    case DType::F64:
      std::memcpy(p, &v, 8);
      return;
  }
}

double get(DType dt, const std::byte* p) {
  switch (dt) {
    case DType::F32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::BF16:
    case DType::F16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return dt == DType::BF16 ? kernels::f32_from_bf16(h) : kernels::f32_from_f16(h);
    }
    case DType::I32: {
      int32_t i;
      std::memcpy(&i, p, 4);
      return i;
    }
    case DType::I64: {
      int64_t i;
      std::memcpy(&i, p, 8);
      return static_cast<double>(i);
    }
    case DType::U8:
      return static_cast<double>(static_cast<uint8_t>(*p));
    case DType::F64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
  }
  return 0;
}

// The value the dtype stores for v (rounded to nearest even, or wrapped for uint8).
double stored(DType dt, double v) {
  std::byte b[8];
  put(dt, b, v);
  return get(dt, b);
}

}  // namespace

CollOp collective_from_name(const std::string& s) {
  for (CollOp c : kCollectives)
    if (s == comm::coll_op_name(c)) return c;
  for (CollOp c : {CollOp::AllToAll, CollOp::ChunkTree})
    if (s == comm::coll_op_name(c)) return c;
  ENGINE_FAIL("unknown collective '", s,
              "' (expected all_reduce, broadcast, reduce, all_gather, reduce_scatter, all_to_all, "
              "chunk_tree_all_reduce or all)");
}

double busbw_factor(CollOp c, int world) {
  const double n = world;
  switch (c) {
    case CollOp::AllReduce:
    case CollOp::ChunkTree:
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

int64_t total_count(CollOp c, int64_t nbytes, int world, DType dt) {
  const int64_t count = nbytes / static_cast<int64_t>(dtype_size(dt));
  if (c == CollOp::AllGather || c == CollOp::ReduceScatter || c == CollOp::AllToAll)
    return count / world * world;
  return count;
}

const char* type_column_name(DType dt) {
  switch (dt) {
    case DType::F32:
      return "float";
    case DType::F16:
      return "half";
    default:
      return dtype_long_name(dt);
  }
}

CollectiveRun::CollectiveRun(CollOp c, comm::Communicator& comm, int64_t count, comm::ReduceOp op,
                             Backend backend, DType dtype)
    : c_(c),
      comm_(comm),
      count_(count),
      chunk_(count / comm.size()),
      op_(op),
      backend_(backend),
      dt_(dtype),
      es_(dtype_size(dtype)) {
  in_.assign((c_ == CollOp::AllGather ? chunk_ : count_) * es_, std::byte{0});
  out_.assign((c_ == CollOp::ReduceScatter ? chunk_ : count_) * es_, std::byte{0});
  if (backend_.device >= 0 && count_ > 0) {  // zeros, as the host vectors start
    const Device dev = Device::cuda(backend_.device);
    din_ = Tensor::zeros({int64_t(in_.size() / es_)}, dt_, dev);
    if (!out_.empty()) dout_ = Tensor::zeros({int64_t(out_.size() / es_)}, dt_, dev);
    device_synchronize(backend_.device);
  }
}

// The Tensor overloads of comm::Communicator and comm::NcclGroup have the same shape.
template <class Comm>
void CollectiveRun::run_tensors(Comm& c) {
  const int r = comm_.rank();
  const bool ip = in_place_;
  switch (c_) {
    case CollOp::AllReduce:
      if (!ip) dout_.copy_from(din_);
      c.all_reduce(ip ? din_ : dout_, op_);
      break;
    case CollOp::Broadcast:
      if (!ip && r == 0) dout_.copy_from(din_);
      c.broadcast(ip ? din_ : dout_, 0);
      break;
    case CollOp::Reduce:
      if (!ip) dout_.copy_from(din_);
      c.reduce(ip ? din_ : dout_, op_, 0);
      break;
    case CollOp::AllGather:
      c.all_gather(ip ? dout_.flat_slice(r * chunk_, chunk_) : din_, dout_);
      break;
    case CollOp::ReduceScatter:
      c.reduce_scatter(din_, ip ? din_.flat_slice(r * chunk_, chunk_) : dout_, op_);
      break;
    default:
      ENGINE_FAIL("allreduce_bench: ", comm::coll_op_name(c_), " is not timed");
  }
}

void CollectiveRun::finish() {
  if (backend_.device >= 0) device_synchronize(backend_.device);
}

void CollectiveRun::run_host() {
  const int r = comm_.rank();
  const bool ip = in_place_;
  std::byte* buf = ip ? in_.data() : out_.data();
  if (!ip && !in_.empty() && c_ != CollOp::AllGather && c_ != CollOp::ReduceScatter &&
      c_ != CollOp::AllToAll && c_ != CollOp::ChunkTree && (c_ != CollOp::Broadcast || r == 0))
    std::memcpy(out_.data(), in_.data(), in_.size());
  switch (c_) {
    case CollOp::AllReduce:
      comm_.all_reduce(buf, count_, dt_, op_);
      break;
    case CollOp::Broadcast:
      comm_.broadcast(buf, count_, dt_, 0);
      break;
    case CollOp::Reduce:
      comm_.reduce(buf, count_, dt_, op_, 0);
      break;
    case CollOp::AllGather:
      comm_.all_gather(ip ? at(out_, r * chunk_) : in_.data(), out_.data(), chunk_, dt_);
      break;
    case CollOp::ReduceScatter:
      comm_.reduce_scatter(in_.data(), ip ? at(in_, r * chunk_) : out_.data(), chunk_, dt_, op_);
      break;
    case CollOp::AllToAll:
      comm_.all_to_all(in_.data(), out_.data(), chunk_, dt_);
      break;
    case CollOp::ChunkTree:  // one chunk per rank: rank r holds leaf r of W
      comm_.chunk_tree_all_reduce(comm_.size(), {{chunk_tree::Node{0, size_t(r)}, in_.data()}}, buf,
                                  count_, dt_);
      break;
    default:
      ENGINE_FAIL("allreduce_bench: ", comm::coll_op_name(c_), " is not timed");
  }
}

void CollectiveRun::run() {
  if (backend_.device < 0) return run_host();
  if (count_ == 0) return;
  if (backend_.nccl)
    run_tensors(*backend_.nccl);
  else
    run_tensors(comm_);
}

double CollectiveRun::value(int rank, int64_t i) const {
  const int w = comm_.size();
  const bool narrow = dt_ == DType::U8 || dt_ == DType::BF16 || dt_ == DType::F16;
  if (op_ == comm::ReduceOp::Prod)  // products stay exact: at most one factor 2 (narrow types)
    return narrow ? 1.0 + ((i + rank) % w == 0) : 1.0 + double((i + rank) % 3);
  if (dt_ == DType::U8) return double((i * 7 + rank * 3) % 256);  // sums wrap alike everywhere
  if (dt_ == DType::BF16 || dt_ == DType::F16) {  // sums of w values stay below 2^8 or 2^11
    const int64_t top = std::max<int64_t>(1, (dt_ == DType::BF16 ? 256 : 2048) / w - 1);
    return 1.0 + double((i * 5 + rank * 3) % top);
  }
  return double((i % 4093) * 64 + rank);  // 4093: a prime period
}

double CollectiveRun::expected_reduction(int64_t i) const {
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
  if (op_ == comm::ReduceOp::Avg) acc = static_cast<float>(acc) / static_cast<float>(w);
  return stored(dt_, acc);
}

int64_t CollectiveRun::count_wrong(const std::byte* got, const std::vector<double>& want) const {
  // Exact, but AVG's division may round either way of the quotient (MPI's and NCCL's too).
  double tol = 0.0;
  if (op_ == comm::ReduceOp::Avg)
    tol = dt_ == DType::BF16 ? 1.0 / 128 : dt_ == DType::F16 ? 1.0 / 1024 : 1e-6;
  int64_t wrong = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = get(dt_, got + i * es_);
    if (!(std::fabs(g - want[i]) <= tol * std::fabs(want[i]))) ++wrong;
  }
  return wrong;
}

int64_t CollectiveRun::check() {
  const int r = comm_.rank(), w = comm_.size();
  const bool ip = in_place_;
  // Inputs: in_, or for all_gather in place this rank's slot of out_; the rest of out_ a
  // sentinel that no result equals.
  for (size_t i = 0; i < out_.size() / es_; ++i) put(dt_, out_.data() + i * es_, 99.0);
  std::byte* src = c_ == CollOp::AllGather && ip ? at(out_, r * chunk_) : in_.data();
  const int64_t nin = c_ == CollOp::AllGather ? chunk_ : count_;
  for (int64_t i = 0; i < nin; ++i) put(dt_, src + i * es_, value(r, i));
  const bool on_device = backend_.device >= 0 && count_ > 0;
  auto host_tensor = [&](const std::vector<std::byte>& v) {
    Tensor t = Tensor::empty({int64_t(v.size() / es_)}, dt_);
    if (!v.empty()) std::memcpy(t.raw_data(), v.data(), v.size());
    return t;
  };
  if (on_device) {
    din_.copy_from(host_tensor(in_));
    if (dout_.defined()) dout_.copy_from(host_tensor(out_));
    device_synchronize(backend_.device);
  }
  run();
  if (on_device) {
    finish();
    Tensor h = din_.to(Device::cpu());
    std::memcpy(in_.data(), h.raw_data(), in_.size());
    if (dout_.defined()) {
      h = dout_.to(Device::cpu());
      std::memcpy(out_.data(), h.raw_data(), out_.size());
    }
  }
  std::vector<double> want;
  const std::byte* got = ip ? in_.data() : out_.data();
  switch (c_) {
    case CollOp::AllReduce:
    case CollOp::ChunkTree:  // exact values: every association gives these
      for (int64_t i = 0; i < count_; ++i) want.push_back(expected_reduction(i));
      break;
    case CollOp::Broadcast:
      for (int64_t i = 0; i < count_; ++i) want.push_back(stored(dt_, value(0, i)));
      break;
    case CollOp::Reduce:  // the root gets the reduction; the others keep their input
      for (int64_t i = 0; i < count_; ++i)
        want.push_back(r == 0 ? expected_reduction(i) : stored(dt_, value(r, i)));
      break;
    case CollOp::AllGather:  // rank q's chunk holds value(q, 0..chunk)
      for (int q = 0; q < w; ++q)
        for (int64_t i = 0; i < chunk_; ++i) want.push_back(stored(dt_, value(q, i)));
      got = out_.data();
      break;
    case CollOp::ReduceScatter:  // this rank's chunk of the reduction
      for (int64_t i = 0; i < chunk_; ++i) want.push_back(expected_reduction(r * chunk_ + i));
      got = ip ? in_.data() + r * chunk_ * es_ : out_.data();
      break;
    case CollOp::AllToAll:  // chunk q comes from rank q's chunk r
      for (int q = 0; q < w; ++q)
        for (int64_t i = 0; i < chunk_; ++i) want.push_back(stored(dt_, value(q, r * chunk_ + i)));
      got = out_.data();
      break;
    default:
      ENGINE_FAIL("allreduce_bench: ", comm::coll_op_name(c_), " is not checked");
  }
  return count_wrong(got, want);
}

}  // namespace engine::allreduce_bench
