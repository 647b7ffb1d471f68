// comm/communicator_all_to_all.cpp: the Communicator's all_to_all and all_to_all_single, on raw
// host buffers and CPU tensors (the algorithm: comm/algorithms/all_to_all.h).
#include <numeric>

#include "comm/algorithms/all_to_all.h"
#include "comm/communicator.h"
#include "core/error.h"

namespace engine::comm {

void Communicator::check_all_to_all(const std::vector<size_t>& send_counts,
                                    const std::vector<size_t>& recv_counts) const {
  const size_t W = static_cast<size_t>(size());
  ENGINE_CHECK(send_counts.size() == W && recv_counts.size() == W, "all_to_all_single on rank ",
               rank(), ": ", send_counts.size(), " send and ", recv_counts.size(),
               " receive split sizes for ", W, " ranks");
  ENGINE_CHECK(send_counts[rank()] == recv_counts[rank()], "all_to_all_single on rank ", rank(),
               ": it sends itself ", send_counts[rank()], " elements but expects ",
               recv_counts[rank()]);
}

void Communicator::all_to_all(const void* in, void* out, size_t count, DType dtype) {
  run([&] {
    direct_all_to_all(call(CollOp::AllToAll, count, dtype, ReduceOp::Sum, -1), in, out, nullptr,
                      nullptr);
  });
}

void Communicator::all_to_all_single(const void* in, void* out,
                                     const std::vector<size_t>& send_counts,
                                     const std::vector<size_t>& recv_counts, DType dtype) {
  check_all_to_all(send_counts, recv_counts);
  const size_t total = std::accumulate(send_counts.begin(), send_counts.end(), size_t{0});
  run([&] {
    direct_all_to_all(call(CollOp::AllToAll, total, dtype, ReduceOp::Sum, -1), in, out,
                      send_counts.data(), recv_counts.data());
  });
}

void Communicator::all_to_all(const Tensor& in, const Tensor& out) {
  ENGINE_CHECK(in.defined() && out.defined(), "comm all_to_all: undefined tensor");
  ENGINE_CHECK(!in.device().is_cuda() && !out.device().is_cuda(),
               "all_to_all: CPU tensors only (got ", in.device().str(), ", ", out.device().str(),
               ")");
  const size_t n = static_cast<size_t>(in.numel()), W = static_cast<size_t>(size());
  ENGINE_CHECK(in.dtype() == out.dtype() && static_cast<size_t>(out.numel()) == n && n % W == 0,
               "all_to_all: in and out must hold the same number of ", dtype_name(in.dtype()),
               ", a multiple of ", W, " (got ", n, " and ", out.numel(), ")");
  all_to_all(in.raw_data(), out.raw_data(), n / W, in.dtype());
}

void Communicator::all_to_all_single(const Tensor& in, const Tensor& out,
                                     const std::vector<size_t>& send_counts,
                                     const std::vector<size_t>& recv_counts) {
  if (send_counts.empty() && recv_counts.empty()) return all_to_all(in, out);
  ENGINE_CHECK(in.defined() && out.defined(), "comm all_to_all_single: undefined tensor");
  ENGINE_CHECK(!in.device().is_cuda() && !out.device().is_cuda(),
               "all_to_all_single: CPU tensors only (got ", in.device().str(), ", ",
               out.device().str(), ")");
  ENGINE_CHECK(in.dtype() == out.dtype(), "all_to_all_single: in is ", dtype_name(in.dtype()),
               ", out is ", dtype_name(out.dtype()));
  const auto sum = [](const std::vector<size_t>& v) {
    return std::accumulate(v.begin(), v.end(), size_t{0});
  };
  ENGINE_CHECK(sum(send_counts) == static_cast<size_t>(in.numel()) &&
                   sum(recv_counts) == static_cast<size_t>(out.numel()),
               "all_to_all_single: the send splits add up to ", sum(send_counts),
               " and the receive splits to ", sum(recv_counts), " but in holds ", in.numel(),
               " and out ", out.numel(), " elements");
  all_to_all_single(in.raw_data(), out.raw_data(), send_counts, recv_counts, in.dtype());
}

}  // namespace engine::comm
