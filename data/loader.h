// data/loader.h: BatchLoader: one rank's shard of a split, cut into shuffled batches that a
// background thread assembles (gather + normalise) ahead of the consumer.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "data/batch.h"
#include "data/mnist.h"

namespace engine::data {

// Epoch order: with shuffle, the shard's indices Fisher-Yates shuffled by ShuffleRng seeded with
// epoch_seed(seed, epoch, rank) = hash_seed({seed, epoch, rank}) (data/shuffle.h), so every rank
// and every epoch gets its own well-mixed order (never seed + rank, whose streams overlap);
// without shuffle, the shard's order. Batches are consecutive runs of batch_size of that order;
// the last one is smaller, or dropped when drop_last. Same arguments, same batches, bit for bit,
// whatever the thread timing.
//
// Prefetch: a persistent worker thread keeps up to `prefetch` assembled batches ready (prefetch 0:
// no thread, next() assembles inline). start_epoch() may be called at any time (leftover batches
// of the previous epoch are discarded); the destructor stops and joins the worker even if the
// consumer stopped mid-epoch. The split must outlive the loader.
class BatchLoader {
 public:
  BatchLoader(const MnistSplit& split, std::vector<int64_t> indices, int64_t batch_size,
              bool shuffle, bool drop_last, uint64_t seed, int rank, int prefetch = 2);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  void start_epoch(int64_t epoch);
  // The epoch's next batch into *out (whose buffers are recycled); false when the epoch is done.
  // Throws engine::Error if start_epoch was never called, engine::TimeoutError if the worker
  // produced nothing within the timeout (60 s unless set_next_timeout; it names rank, epoch and
  // batch); the batch it waited for still comes to a later next().
  bool next(Batch* out);

  int64_t batches_per_epoch() const;
  int64_t shard_size() const { return static_cast<int64_t>(indices_.size()); }
  int64_t batch_size() const { return batch_size_; }
  // The current epoch's sample order (before batching and drop_last); consumer thread only.
  const std::vector<int64_t>& epoch_order() const { return *order_; }

  static uint64_t epoch_seed(uint64_t seed, int64_t epoch, int rank);
  // Data on the device: batches carry their size and indices only (the device gathers them,
  // checking nothing: the indices are checked here). Before start_epoch.
  void set_indices_only(bool on) { indices_only_ = on; }
  // How long next() waits for the prefetch thread (tests/data/test_loader.cpp sets a short one).
  void set_next_timeout(std::chrono::milliseconds t) { next_timeout_ = t; }

 private:
  void worker_loop();
  // Batch b of order: positions [b * B, min((b + 1) * B, shard size)).
  void assemble(const std::vector<int64_t>& order, int64_t b, Batch* out) const;

  const MnistSplit& split_;
  const std::vector<int64_t> indices_;
  const int64_t batch_size_;
  const bool shuffle_, drop_last_;
  const uint64_t seed_;
  const int rank_;
  const size_t prefetch_;
  bool indices_only_ = false;
  std::chrono::milliseconds next_timeout_{60000};

  std::mutex mu_;
  std::condition_variable work_cv_;   // worker waits: room in ready_, new epoch, or stop
  std::condition_variable ready_cv_;  // consumer waits: a batch in ready_, or an error
  std::shared_ptr<const std::vector<int64_t>> order_;  // replaced, never mutated, per epoch
  uint64_t generation_ = 0;  // bumped by start_epoch; a batch of an older one is discarded
  int64_t epoch_ = -1;
  int64_t produced_ = 0, consumed_ = 0, total_ = 0;
  std::deque<Batch> ready_;
  std::vector<Batch> spare_;  // recycled buffers
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace engine::data
