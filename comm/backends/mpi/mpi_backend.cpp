// comm/backends/mpi/mpi_backend.cpp: the MPI backend - every collective on MPI
// (MPI_Allreduce and friends) on a communicator of its own, CPU tensors and raw host buffers in
// place, CUDA tensors through host copies. MPI has no time limits: a watchdog
// (comm/health/call_watchdog.h) ends the job when a call outlives its context's timeout.
#ifdef ENGINE_WITH_MPI

#include "comm/backends/mpi/mpi_backend.h"

#include <algorithm>
#include <climits>
#include <iterator>
#include <vector>

#include "comm/backends/mpi/mpi_check.h"
#include "comm/backends/mpi/mpi_world.h"
#include "core/error.h"

namespace engine::comm {

namespace {

// In-place collectives are cut into calls of at most this many elements (MPI counts are int).
constexpr size_t kMaxCount = size_t(1) << 30;

MPI_Datatype mpi_type(DType dt) {
  switch (dt) {
    case DType::F32:
      return MPI_FLOAT;
    case DType::U8:
      return MPI_UINT8_T;
    case DType::I64:
      return MPI_INT64_T;
    case DType::I32:
      return MPI_INT32_T;
    case DType::F64:
      return MPI_DOUBLE;
    case DType::BF16:
    case DType::F16:
      return MPI_UINT16_T;  // moved as bits, reduced by our own operations (mpi_op)
  }
  ENGINE_FAIL("the MPI backend: no MPI type for dtype ", static_cast<int>(dt));
}

// Our element loops as MPI operations where MPI's would differ: float32 max and min (ours let a
// NaN win, as the ring does; MPI_MAX and MPI_MIN need not), and every op of the 16-bit floats
// (MPI has no bfloat16; they travel as MPI_UINT16_T and combine in fp32).
template <DType D, ReduceOp O>
void our_op(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_into(inout, in, static_cast<size_t>(*len), D, O);
}

struct OurOp {
  DType dt;
  ReduceOp op;
  MPI_User_function* fn;
};

constexpr OurOp kOurOps[] = {
    {DType::F32, ReduceOp::Max, our_op<DType::F32, ReduceOp::Max>},
    {DType::F32, ReduceOp::Min, our_op<DType::F32, ReduceOp::Min>},
    {DType::BF16, ReduceOp::Sum, our_op<DType::BF16, ReduceOp::Sum>},
    {DType::BF16, ReduceOp::Prod, our_op<DType::BF16, ReduceOp::Prod>},
    {DType::BF16, ReduceOp::Max, our_op<DType::BF16, ReduceOp::Max>},
    {DType::BF16, ReduceOp::Min, our_op<DType::BF16, ReduceOp::Min>},
    {DType::F16, ReduceOp::Sum, our_op<DType::F16, ReduceOp::Sum>},
    {DType::F16, ReduceOp::Prod, our_op<DType::F16, ReduceOp::Prod>},
    {DType::F16, ReduceOp::Max, our_op<DType::F16, ReduceOp::Max>},
    {DType::F16, ReduceOp::Min, our_op<DType::F16, ReduceOp::Min>},
};

MPI_Op mpi_op(DType dt, ReduceOp op) {
  static const std::vector<MPI_Op> ours = [] {
    std::vector<MPI_Op> v(std::size(kOurOps));
    for (size_t i = 0; i < v.size(); ++i) MPI_Op_create(kOurOps[i].fn, 1, &v[i]);
    return v;
  }();
  const ReduceOp combine = op == ReduceOp::Avg ? ReduceOp::Sum : op;  // Avg: a sum, then divided
  for (size_t i = 0; i < std::size(kOurOps); ++i)
    if (kOurOps[i].dt == dt && kOurOps[i].op == combine) return ours[i];
  switch (combine) {
    case ReduceOp::Prod:
      return MPI_PROD;
    case ReduceOp::Max:
      return MPI_MAX;
    case ReduceOp::Min:
      return MPI_MIN;
    default:
      return MPI_SUM;
  }
}

// The MPI call of each CollOp, in CollOp's order (comm/base/frame.h).
const char* mpi_call_name(CollOp op) {
  static const char* const kNames[] = {
      "MPI call",      "MPI_Allreduce", "MPI_Bcast",   "MPI_Reduce",
      "MPI_Allgather", "MPI_Gather",    "MPI_Scatter", "MPI_Reduce_scatter_block",
      "MPI_Barrier"};
  const size_t i = static_cast<size_t>(op);
  return i < std::size(kNames) ? kNames[i] : "MPI call";
}

bool on_cuda(const Tensor& t) {
  return t.defined() && t.device().is_cuda();
}

void* ptr(const Tensor& t) {
  return t.defined() ? t.raw_data() : nullptr;
}

class MpiBackend final : public Backend {
 public:
  MpiBackend(int rank, int world, Millis timeout);
  ~MpiBackend() override;
  const char* name() const override { return "mpi"; }

  void all_reduce(const CollContext& c, const Tensor& t, const cuda::Event*) override {
    tensors(c, Tensor(), t);
  }
  void broadcast(const CollContext& c, const Tensor& t) override { tensors(c, Tensor(), t); }
  void reduce(const CollContext& c, const Tensor& t) override { tensors(c, Tensor(), t); }
  void all_gather(const CollContext& c, const Tensor& in, const Tensor& out) override {
    tensors(c, in, out);
  }
  void gather(const CollContext& c, const Tensor& in, const Tensor& out) override {
    tensors(c, in, out);
  }
  void scatter(const CollContext& c, const Tensor& in, const Tensor& out) override {
    tensors(c, in, out);
  }
  void reduce_scatter(const CollContext& c, const Tensor& in, const Tensor& out) override {
    tensors(c, in, out);
  }
  void host_buffers(const CollContext& c, const void* in, void* out) override;

 private:
  void tensors(const CollContext& c, const Tensor& in, const Tensor& out);
  void in_place(const Fingerprint& f, void* data);
  void parts(const Fingerprint& f, const void* in, void* out);

  int rank_, world_;
  CallWatchdog watchdog_;
  MPI_Comm comm_ = MPI_COMM_NULL;
};

MpiBackend::MpiBackend(int rank, int world, Millis timeout)
    : rank_(rank),
      world_(world),
      watchdog_([rank](const WatchedCall& c) { mpi_call_expired(rank, c); }) {
  // A communicator of our own, its processes ordered by our ranks: collective calls of other
  // code on MPI_COMM_WORLD never mix with ours.
  Fingerprint fp;
  WatchScope watch(
      &watchdog_,
      {"MPI_Comm_split (starting the MPI backend: does every rank use it?)", fp, timeout});
  mpi_check(MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &comm_), "MPI_Comm_split", rank);
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
}

MpiBackend::~MpiBackend() {
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

// CPU tensors in place; CUDA tensors through host copies: the inputs (and the buffer of an
// in-place collective) come down before the call, the outputs go back up after it.
void MpiBackend::tensors(const CollContext& c, const Tensor& in, const Tensor& out) {
  const Device cpu = Device::cpu();
  const bool in_place =
      !in.defined() &&
      (c.fp.op == CollOp::AllReduce || c.fp.op == CollOp::Broadcast || c.fp.op == CollOp::Reduce);
  const Tensor hin = on_cuda(in) ? in.to(cpu) : in;
  Tensor hout = out;
  if (on_cuda(out)) hout = in_place ? out.to(cpu) : Tensor::empty(out.shape(), out.dtype(), cpu);
  host_buffers(c, ptr(hin), ptr(hout));
  if (on_cuda(out)) Tensor(out).copy_from(hout);
}

void MpiBackend::host_buffers(const CollContext& c, const void* in, void* out) {
  const Fingerprint& f = c.fp;
  WatchScope watch(&watchdog_, {mpi_call_name(f.op), f, c.timeout});
  switch (f.op) {
    case CollOp::AllReduce:
    case CollOp::Broadcast:
    case CollOp::Reduce:
      return in_place(f, out);
    case CollOp::Barrier:
      return mpi_check(MPI_Barrier(comm_), "MPI_Barrier", rank_);
    default:
      return parts(f, in, out);
  }
}

void MpiBackend::in_place(const Fingerprint& f, void* data) {
  const MPI_Datatype type = mpi_type(f.dtype);
  const size_t esize = dtype_size(f.dtype);
  const char* what = mpi_call_name(f.op);
  for (size_t done = 0; done < f.count;) {
    const size_t n = std::min<size_t>(f.count - done, kMaxCount);
    char* d = static_cast<char*>(data) + done * esize;
    const int count = static_cast<int>(n);
    int rc = MPI_SUCCESS;
    if (f.op == CollOp::AllReduce)
      rc = MPI_Allreduce(MPI_IN_PLACE, d, count, type, mpi_op(f.dtype, f.redop), comm_);
    else if (f.op == CollOp::Broadcast)
      rc = MPI_Bcast(d, count, type, f.root, comm_);
    else if (rank_ == f.root)
      rc = MPI_Reduce(MPI_IN_PLACE, d, count, type, mpi_op(f.dtype, f.redop), f.root, comm_);
    else
      rc = MPI_Reduce(d, nullptr, count, type, mpi_op(f.dtype, f.redop), f.root, comm_);
    mpi_check(rc, what, rank_);
    done += n;
  }
  const bool reduced = f.op == CollOp::AllReduce || (f.op == CollOp::Reduce && rank_ == f.root);
  if (f.redop == ReduceOp::Avg && reduced) divide_by(data, f.count, f.dtype, world_);
}

// The collectives with a part per rank: all_gather, gather, scatter, reduce_scatter.
void MpiBackend::parts(const Fingerprint& f, const void* in, void* out) {
  ENGINE_CHECK(f.count <= size_t(INT_MAX), "the MPI backend on rank ", rank_, ": ",
               coll_op_name(f.op), " of ", f.count,
               " elements per rank is more than an MPI count holds (", INT_MAX, ")");
  const MPI_Datatype type = mpi_type(f.dtype);
  const int n = static_cast<int>(f.count);
  const char* what = mpi_call_name(f.op);
  int rc = MPI_SUCCESS;
  switch (f.op) {
    case CollOp::AllGather: {
      // This rank's part already in place in out: MPI wants MPI_IN_PLACE then.
      const char* mine = static_cast<char*>(out) + size_t(rank_) * f.count * dtype_size(f.dtype);
      const void* send = in == mine ? MPI_IN_PLACE : in;
      rc = MPI_Allgather(send, n, type, out, n, type, comm_);
      break;
    }
    case CollOp::Gather:
      rc = MPI_Gather(in, n, type, out, n, type, f.root, comm_);
      break;
    case CollOp::Scatter:
      rc = MPI_Scatter(in, n, type, out, n, type, f.root, comm_);
      break;
    case CollOp::ReduceScatter:
      rc = MPI_Reduce_scatter_block(in, out, n, type, mpi_op(f.dtype, f.redop), comm_);
      if (rc == MPI_SUCCESS && f.redop == ReduceOp::Avg) divide_by(out, f.count, f.dtype, world_);
      break;
    default:
      ENGINE_FAIL("the MPI backend: ", coll_op_name(f.op), " is not a collective");
  }
  mpi_check(rc, what, rank_);
}

}  // namespace

std::unique_ptr<Backend> make_mpi_backend(int rank, int world, Millis timeout) {
  ENGINE_CHECK(
      started_by_mpirun(), "the MPI backend: rank ", rank,
      " was not started by mpirun (no OMPI_COMM_WORLD_SIZE and PMIX_RANK): start the ranks "
      "with mpirun -np ",
      world);
  mpi_init();
  int mpi_world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &mpi_world);
  ENGINE_CHECK(mpi_world == world, "the MPI backend: MPI's world has ", mpi_world,
               " process(es) but this job has ", world, " ranks: start them all with mpirun -np ",
               world);
  return std::make_unique<MpiBackend>(rank, world, timeout);
}

}  // namespace engine::comm

#endif  // ENGINE_WITH_MPI
