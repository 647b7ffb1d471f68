// parallel/nonfinite.cpp: see nonfinite.h.
#include "parallel/nonfinite.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/sync_guard.h"
#include "kernels/cpu/finite.h"
#include "kernels/cuda/ops.h"
#include "kernels/dispatch.h"

namespace engine::parallel {

NonfiniteStop::NonfiniteStop(std::string found)
    : Error(found + "; stopped, no checkpoint written from it"), found_(std::move(found)) {}

NonfiniteGuard::NonfiniteGuard(NonfiniteMode mode, nn::NamedTensors params, Device dev, int rank,
                               comm::Communicator* agree)
    : mode_(mode), params_(std::move(params)), agree_(agree), dev_(dev), rank_(rank) {
  flags_ = Tensor::zeros({static_cast<int64_t>(params_.size())}, DType::F32, dev_);
  seed_ = Tensor::empty({}, DType::F32, dev_);
}

Tensor NonfiniteGuard::seed(const Tensor& loss, float scale) {
  if (mode_ == NonfiniteMode::Off)
    return scale == 1.0f ? Tensor() : Tensor::full(loss.shape(), scale, loss.device());
  if (loss.device() != seed_.device())
    seed_ = Tensor::empty(loss.shape(), DType::F32, loss.device());
  kernels::call(loss.device(), kernels::cpu::finite_seed, kernels::cuda::finite_seed,
                loss.data<float>(), seed_.data<float>());
  Tensor seed = seed_.view(loss.shape());  // 1, or NaN for a non-finite loss
  if (scale != 1.0f) seed.mul_(scale);     // d(scale * loss) = scale * d(loss)
  return seed;
}

void NonfiniteGuard::scan(Tensor row) {
  row.fill_(0.f);
  float* out = row.data<float>();
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = params_[i].second.grad();
    if (!g.defined()) continue;
    kernels::call(dev_, kernels::cpu::flag_nonfinite, kernels::cuda::flag_nonfinite,
                  g.data<float>(), g.numel(), out + i);
  }
}

int64_t NonfiniteGuard::first_in(const std::vector<float>& f) const {
  for (size_t i = 0; i < f.size(); ++i)
    if (f[i] != 0.f) return static_cast<int64_t>(i);
  return static_cast<int64_t>(f.size());
}

bool NonfiniteGuard::allow_step(int64_t step, const Tensor& loss) {
  if (mode_ == NonfiniteMode::Off) return true;
  const int64_t p = static_cast<int64_t>(params_.size());
  if (mode_ == NonfiniteMode::Stop &&
      !agree_) {  // the flags stay on the device; queue_scan queues them
    scan(flags_);
    scanned_step_ = step;
    return true;
  }
  sync_guard::Allow allow;  // skip, and the ranks' agreement: a host decision every step
  scan(flags_);
  int64_t first = first_in(flags_.to_vector());
  if (agree_) agree_->all_reduce(&first, 1, DType::I64, comm::ReduceOp::Min);
  if (first >= p) return true;
  if (mode_ == NonfiniteMode::Stop) stop(step, params_[first].first, loss.item());
  ++skipped_;
  return false;
}

void NonfiniteGuard::replayed(int64_t step) {
  if (mode_ == NonfiniteMode::Stop && !agree_) scanned_step_ = step;
}

// A row per step since the last read: a graph writes its scan into flags_ at every replay, so the
// flags are copied out before the next step (queued on the device: no host wait).
void NonfiniteGuard::queue_scan(const Tensor& loss) {
  if (scanned_step_ < 0) return;
  const int64_t p = static_cast<int64_t>(params_.size());
  const int64_t k = static_cast<int64_t>(pending_steps_.size());
  if (!rows_.defined() || (k + 1) * p > rows_.numel()) {  // grows on the device, no host wait
    Tensor grown =
        Tensor::empty({std::max<int64_t>(128, 2 * k) * std::max<int64_t>(p, 1)}, DType::F32, dev_);
    if (k > 0 && p > 0) grown.flat_slice(0, k * p).copy_from(rows_.flat_slice(0, k * p));
    rows_ = grown;
  }
  if (p > 0) rows_.flat_slice(k * p, p).copy_from(flags_);
  pending_steps_.push_back(scanned_step_);
  pending_losses_.push_back(loss.detach().clone());
  scanned_step_ = -1;
}

void NonfiniteGuard::check_pending() {
  if (pending_steps_.empty()) return;
  const int64_t p = static_cast<int64_t>(params_.size());
  const int64_t k = static_cast<int64_t>(pending_steps_.size());
  const std::vector<float> all =
      p > 0 ? rows_.flat_slice(0, k * p).to_vector() : std::vector<float>{};
  std::vector<int64_t> steps;
  std::vector<Tensor> losses;
  steps.swap(pending_steps_);
  losses.swap(pending_losses_);
  for (int64_t r = 0; r < k && p > 0; ++r) {
    const int64_t first =
        first_in(std::vector<float>(all.begin() + r * p, all.begin() + (r + 1) * p));
    if (first < p) stop(steps[r], params_[first].first, losses[r].item());
  }
}

void NonfiniteGuard::stop(int64_t step, const std::string& name, double loss) const {
  throw NonfiniteStop(detail::concat("step ", step, ": the gradient of ", name,
                                     " is not finite (loss ", loss, " on rank ", rank_, ")"));
}

std::string first_nonfinite(const nn::NamedTensors& ts) {
  if (ts.empty()) return "";
  std::vector<size_t> which;
  for (size_t i = 0; i < ts.size(); ++i)
    if (ts[i].second.dtype() == DType::F32) which.push_back(i);
  if (which.empty()) return "";
  const Device dev = ts[which[0]].second.device();
  Tensor flags = Tensor::zeros({static_cast<int64_t>(which.size())}, DType::F32, dev);
  for (size_t k = 0; k < which.size(); ++k) {
    const Tensor& t = ts[which[k]].second;
    Tensor on = t.device() == dev ? t : t.to(dev);
    kernels::call(dev, kernels::cpu::flag_nonfinite, kernels::cuda::flag_nonfinite,
                  on.data<float>(), on.numel(), flags.data<float>() + k);
  }
  const std::vector<float> f = flags.to_vector();
  for (size_t k = 0; k < f.size(); ++k)
    if (f[k] != 0.f) return ts[which[k]].first;
  return "";
}

}  // namespace engine::parallel
