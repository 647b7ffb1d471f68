// data/loader.cpp: BatchLoader's epoch order and its prefetch thread.
#include "data/loader.h"

#include <algorithm>

#include "core/error.h"
#include "data/shuffle.h"

namespace engine::data {

BatchLoader::BatchLoader(const MnistSplit& split, std::vector<int64_t> indices, int64_t batch_size,
                         bool shuffle, bool drop_last, uint64_t seed, int rank, int prefetch)
    : split_(split),
      indices_(std::move(indices)),
      batch_size_(batch_size),
      shuffle_(shuffle),
      drop_last_(drop_last),
      seed_(seed),
      rank_(rank),
      prefetch_(static_cast<size_t>(std::max(prefetch, 0))) {
  ENGINE_CHECK(batch_size >= 1, "BatchLoader: batch size must be >= 1, got ", batch_size);
  ENGINE_CHECK(prefetch >= 0, "BatchLoader: prefetch must be >= 0, got ", prefetch);
  for (size_t p = 0; p < indices_.size(); ++p) {
    ENGINE_CHECK(indices_[p] >= 0 && indices_[p] < split.count, "BatchLoader (rank ", rank,
                 "): shard index ", indices_[p], " at position ", p, " is outside 0..",
                 split.count - 1, " of ", split.images_path);
  }
  order_ = std::make_shared<const std::vector<int64_t>>(indices_);
  if (prefetch_ > 0) worker_ = std::thread([this] { worker_loop(); });
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  if (worker_.joinable()) worker_.join();  // the worker is at most one batch from its wait
}

uint64_t BatchLoader::epoch_seed(uint64_t seed, int64_t epoch, int rank) {
  return hash_seed({seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(rank)});
}

int64_t BatchLoader::batches_per_epoch() const {
  const int64_t n = shard_size();
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

void BatchLoader::start_epoch(int64_t epoch) {
  auto order = std::make_shared<std::vector<int64_t>>(indices_);
  if (shuffle_) shuffle_with_seed(*order, epoch_seed(seed_, epoch, rank_));
  {
    std::lock_guard lk(mu_);
    ++generation_;
    epoch_ = epoch;
    order_ = std::move(order);
    produced_ = consumed_ = 0;
    total_ = batches_per_epoch();
    error_ = nullptr;
    while (!ready_.empty()) {
      spare_.push_back(std::move(ready_.front()));
      ready_.pop_front();
    }
  }
  work_cv_.notify_all();
}

void BatchLoader::assemble(const std::vector<int64_t>& order, int64_t b, Batch* out) const {
  const int64_t begin = b * batch_size_;
  const int64_t n = std::min(batch_size_, static_cast<int64_t>(order.size()) - begin);
  if (!indices_only_) return gather_batch(split_, order.data() + begin, n, out);
  for (int64_t i = 0; i < n; ++i)
    ENGINE_CHECK(order[begin + i] >= 0 && order[begin + i] < split_.count, "BatchLoader: index ",
                 order[begin + i], " at position ", i, " is outside 0..", split_.count - 1, " of ",
                 split_.images_path);
  out->size = n;
  out->rows = split_.rows;
  out->cols = split_.cols;
  out->images.clear();
  out->labels.clear();
  out->indices.assign(order.begin() + begin, order.begin() + begin + n);
}

void BatchLoader::worker_loop() {
  std::unique_lock lk(mu_);
  while (true) {
    work_cv_.wait(
        lk, [&] { return stop_ || (!error_ && produced_ < total_ && ready_.size() < prefetch_); });
    if (stop_) return;
    const int64_t b = produced_++;
    const uint64_t gen = generation_;
    std::shared_ptr<const std::vector<int64_t>> order = order_;
    Batch buf;
    if (!spare_.empty()) {
      buf = std::move(spare_.back());
      spare_.pop_back();
    }
    lk.unlock();
    std::exception_ptr err;
    try {
      assemble(*order, b, &buf);
    } catch (...) {
      err = std::current_exception();
    }
    lk.lock();
    if (gen != generation_) {  // start_epoch ran meanwhile: this batch belongs to no one
      spare_.push_back(std::move(buf));
      continue;
    }
    if (err) {
      error_ = err;
    } else {
      ready_.push_back(std::move(buf));
    }
    ready_cv_.notify_all();
  }
}

bool BatchLoader::next(Batch* out) {
  std::unique_lock lk(mu_);
  ENGINE_CHECK(epoch_ >= 0, "BatchLoader (rank ", rank_, "): next() before start_epoch()");
  if (consumed_ >= total_) return false;
  if (prefetch_ == 0) {
    const int64_t b = consumed_++;
    std::shared_ptr<const std::vector<int64_t>> order = order_;
    lk.unlock();
    assemble(*order, b, out);
    return true;
  }
  const bool ok = ready_cv_.wait_for(lk, next_timeout_, [&] { return !ready_.empty() || error_; });
  if (!ok) {
    throw TimeoutError(detail::concat(
        "BatchLoader (rank ", rank_, ", epoch ", epoch_, "): waited ", next_timeout_.count(),
        " ms for the prefetch thread to assemble batch ", consumed_, " of ", total_));
  }
  if (ready_.empty()) std::rethrow_exception(error_);  // the worker's failure, for this batch
  std::swap(*out, ready_.front());
  if (spare_.size() <= prefetch_) spare_.push_back(std::move(ready_.front()));
  ready_.pop_front();
  ++consumed_;
  lk.unlock();
  work_cv_.notify_all();
  return true;
}

}  // namespace engine::data
