// comm/half_grad_sync.cpp: gradients packed into bf16 or fp16, one all_reduce, widened back.
#include "comm/half_grad_sync.h"

#include <vector>

#include "core/error.h"
#include "core/sync_guard.h"
#include "core/trace.h"
#include "kernels/half.h"

namespace engine::comm {

HalfGradSync::HalfGradSync(Communicator& comm, NamedParams params, DType wire)
    : comm_(comm), params_(std::move(params)), wire_(wire) {
  ENGINE_CHECK(wire_ == DType::BF16 || wire_ == DType::F16,
               "gradient compression: the wire type must be BF16 or F16, got ", dtype_name(wire_));
  for (const auto& [name, p] : params_) count_ += p.numel();
}

void HalfGradSync::reduce() {
  trace::Scope ts(wire_ == DType::BF16 ? "allreduce bf16" : "allreduce fp16", "comm");
  const bool bf16 = wire_ == DType::BF16;
  sync_guard::Allow host_staged;  // the gradients travel through host memory (a read per step)
  std::vector<uint16_t> flat(static_cast<size_t>(count_), 0);
  size_t at = 0;
  for (const auto& [name, p] : params_) {
    if (p.grad().defined()) {
      const std::vector<float> g = p.grad().to_vector();
      for (size_t i = 0; i < g.size(); ++i)
        flat[at + i] = bf16 ? kernels::bf16_from_f32(g[i]) : kernels::f16_from_f32(g[i]);
    }
    at += static_cast<size_t>(p.numel());
  }
  comm_.all_reduce(flat.data(), flat.size(), wire_, ReduceOp::Sum);
  const float inv_world = 1.0f / static_cast<float>(comm_.size());
  at = 0;
  for (auto& [name, p] : params_) {
    std::vector<float> g(static_cast<size_t>(p.numel()));
    for (size_t i = 0; i < g.size(); ++i)
      g[i] = (bf16 ? kernels::f32_from_bf16(flat[at + i]) : kernels::f32_from_f16(flat[at + i])) *
             inv_world;
    at += g.size();
    Tensor mean = Tensor::from_vector(g, p.shape(), p.device());
    if (p.grad().defined())
      p.grad().copy_from(mean);
    else
      p.set_grad(mean);
  }
}

int64_t HalfGradSync::bytes_per_step() const {
  const int64_t world = comm_.size();
  return world > 1 ? 2 * (world - 1) * count_ * 2 / world : 0;
}

}  // namespace engine::comm
