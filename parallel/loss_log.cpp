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

double LossLog::total() const {
  double sum = sum_;
  if (n_ > 0)
    for (float f : buf_.flat_slice(0, n_).to_vector()) sum += f;
  return sum;
}

double epoch_mean_loss(comm::Communicator* comm, double loss_sum, int64_t batches,
                       bool world_invariant) {
  if (comm && !world_invariant) {
    float sums[2] = {static_cast<float>(loss_sum), static_cast<float>(batches)};
    comm->all_reduce(sums, 2, DType::F32, comm::ReduceOp::Sum);
    loss_sum = sums[0];
    batches = static_cast<int64_t>(sums[1]);
  }
  return batches ? loss_sum / static_cast<double>(batches) : 0;
}

std::vector<double> gather_loss_sums(comm::Communicator* comm, double mine) {
  static_assert(sizeof(double) == sizeof(int64_t), "doubles travel as I64");
  if (!comm) return {mine};
  std::vector<double> all(comm->rank() == 0 ? comm->size() : 0);
  comm->gather(&mine, comm->rank() == 0 ? all.data() : nullptr, 1, DType::I64, 0);
  return all;
}

const double* resumed_loss_sum(const std::vector<double>& sums, bool world_invariant, int world,
                               int rank) {
  if (world_invariant && !sums.empty()) return &sums[0];
  if (sums.size() == static_cast<size_t>(world)) return &sums[rank];
  return nullptr;
}

std::vector<double> members_loss_sums(comm::Communicator& c, const std::vector<double>& kept) {
  double s[2] = {kept.empty() ? 0 : kept[0], kept.empty() ? 0. : 1.};
  c.all_reduce(s, 2, DType::F64, comm::ReduceOp::Sum);
  return std::vector<double>(static_cast<size_t>(c.size()), s[1] > 0 ? s[0] / s[1] : 0);
}

}  // namespace engine::parallel
