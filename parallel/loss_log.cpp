// parallel/loss_log.cpp: see loss_log.h.
#include "parallel/loss_log.h"

#include <algorithm>

#include "core/error.h"

namespace engine::parallel {

void LossLog::start(double sum) {
  n_ = 0;
  sum_ = sum;
  last_ = 0;
}

void LossLog::record(const Tensor& loss) {
  ENGINE_CHECK(loss.numel() == 1 && loss.dtype() == DType::F32, "LossLog: a loss of shape ",
               shape_str(loss.shape()));
  if (!buf_.defined() || buf_.device() != loss.device() || n_ == buf_.numel()) {
    const int64_t cap = std::max<int64_t>(256, buf_.defined() ? 2 * buf_.numel() : 0);
    Tensor grown = Tensor::empty({cap}, DType::F32, loss.device());
    if (buf_.defined() && n_ > 0)  // the unread ones move along (queued, no host wait)
      grown.flat_slice(0, n_).copy_from(buf_.flat_slice(0, n_));
    buf_ = grown;
  }
  buf_.flat_slice(n_++, 1).copy_from(loss.detach().view({1}));
}

std::vector<double> LossLog::read() {
  std::vector<double> out;
  if (n_ == 0) return out;
  const std::vector<float> v = buf_.flat_slice(0, n_).to_vector();
  out.reserve(v.size());
  for (float f : v) {
    const double l = f;
    sum_ += l;
    out.push_back(l);
  }
  last_ = out.back();
  n_ = 0;  // all read: the buffer starts over
  return out;
}

}  // namespace engine::parallel
