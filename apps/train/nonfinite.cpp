// apps/train/nonfinite.cpp: see nonfinite.h.
#include "apps/train/nonfinite.h"

#include <vector>

#include "core/error.h"
#include "kernels/cpu/finite.h"
#include "kernels/cuda/ops.h"
#include "kernels/dispatch.h"

namespace engine::apps {

NonfiniteGuard::NonfiniteGuard(std::string mode, nn::NamedTensors params, Device dev, int rank,
                               comm::Communicator* agree)
    : mode_(std::move(mode)), params_(std::move(params)), agree_(agree), dev_(dev), rank_(rank) {
  flags_ = Tensor::zeros({static_cast<int64_t>(params_.size())}, DType::F32, dev_);
  seed_ = Tensor::empty({}, DType::F32, dev_);
}

Tensor NonfiniteGuard::seed(const Tensor& loss) {
  if (loss.device() != seed_.device())
    seed_ = Tensor::empty(loss.shape(), DType::F32, loss.device());
  kernels::call(loss.device(), kernels::cpu::finite_seed, kernels::cuda::finite_seed,
                loss.data<float>(), seed_.data<float>());
  return seed_.view(loss.shape());
}

void NonfiniteGuard::scan() {
  flags_.fill_(0.f);
  float* flags = flags_.data<float>();
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = params_[i].second.grad();
    if (!g.defined()) continue;
    kernels::call(dev_, kernels::cpu::flag_nonfinite, kernels::cuda::flag_nonfinite,
                  g.data<float>(), g.numel(), flags + i);
  }
}

std::string NonfiniteGuard::first_flagged() {
  const std::vector<float> f = flags_.to_vector();  // on a GPU: waits for the scan
  int64_t first = static_cast<int64_t>(f.size());
  for (size_t i = 0; i < f.size(); ++i)
    if (f[i] != 0.f) {
      first = static_cast<int64_t>(i);
      break;
    }
  if (agree_) agree_->all_reduce(&first, 1, DType::I64, comm::ReduceOp::Min);
  return first < static_cast<int64_t>(f.size()) ? params_[first].first : "";
}

bool NonfiniteGuard::allow_step(int64_t step, const Tensor& loss) {
  scan();
  if (dev_.is_cuda() && mode_ == "stop" && !agree_) {
    pending_step_ = step;
    return true;
  }
  const std::string bad = first_flagged();
  if (bad.empty()) return true;
  if (mode_ == "stop") stop(step, bad, loss.item());
  ++skipped_;
  return false;
}

void NonfiniteGuard::replayed(int64_t step) {
  if (dev_.is_cuda() && mode_ == "stop" && !agree_) pending_step_ = step;
}

void NonfiniteGuard::check_pending(double loss) {
  if (pending_step_ < 0) return;
  const int64_t step = pending_step_;
  pending_step_ = -1;
  const std::string bad = first_flagged();
  if (!bad.empty()) stop(step, bad, loss);
}

void NonfiniteGuard::stop(int64_t step, const std::string& name, double loss) const {
  ENGINE_FAIL("step ", step, ": the gradient of ", name, " is not finite (loss ", loss, " on rank ",
              rank_,
              "); stopped by --nonfinite stop, no checkpoint written from it (--nonfinite skip "
              "skips such steps)");
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

}  // namespace engine::apps
