// core/block_pool.cpp: see block_pool.h.
#include "core/block_pool.h"

#include <utility>

#include "core/error.h"

namespace engine {

BlockPool::BlockPool(std::function<void*(size_t)> sys_alloc, std::function<void(void*)> sys_free)
    : sys_alloc_(std::move(sys_alloc)), sys_free_(std::move(sys_free)) {}

void* BlockPool::take(Bins& bins, size_t cls) {
  auto it = bins.find(cls);
  if (it == bins.end() || it->second.empty()) return nullptr;
  void* b = it->second.back();
  it->second.pop_back();
  return b;
}

void* BlockPool::alloc(size_t cls) {
  void* b = nullptr;
  if (capturing_ != 0) {
    b = take(private_[capturing_], cls);
    if (b) private_free_bytes_ -= cls;
  } else {
    b = take(cached_, cls);
    if (b) stats_.bytes_cached -= cls;
  }
  if (b) {
    ++stats_.reuses;
  } else {
    b = sys_alloc_(cls);
    if (!b && capturing_ == 0) {  // blocks of other size classes may be what fills the memory
      release_cached();
      b = sys_alloc_(cls);
    }
    if (!b) return nullptr;
  }
  live_[b] = Live{cls, capturing_};
  ++stats_.allocs;
  stats_.bytes_in_use += cls;
  if (stats_.bytes_in_use > stats_.peak_bytes_in_use)
    stats_.peak_bytes_in_use = stats_.bytes_in_use;
  return b;
}

size_t BlockPool::live_class(const void* p) const {
  auto it = live_.find(const_cast<void*>(p));
  return it == live_.end() ? 0 : it->second.cls;
}

void BlockPool::free(void* p) {
  auto it = live_.find(p);
  ENGINE_CHECK(it != live_.end(), "BlockPool::free: ", p, " is not a live block");
  const Live l = it->second;
  live_.erase(it);
  stats_.bytes_in_use -= l.cls;
  // During a capture every freed block is the graph's: the captured work may have used it last.
  const uint64_t pool = capturing_ != 0 ? capturing_ : l.pool;
  auto priv = pool != 0 ? private_.find(pool) : private_.end();
  if (priv != private_.end()) {
    priv->second[l.cls].push_back(p);
    private_free_bytes_ += l.cls;
    return;
  }
  cached_[l.cls].push_back(p);  // the general pool, or a private pool already released
  stats_.bytes_cached += l.cls;
}

void BlockPool::release_cached() {
  for (auto& [cls, blocks] : cached_) {
    while (!blocks.empty()) {  // one at a time, so the books stay right if sys_free throws
      sys_free_(blocks.back());
      blocks.pop_back();
      stats_.bytes_cached -= cls;
    }
  }
  cached_.clear();
}

uint64_t BlockPool::create_private() {
  const uint64_t id = next_id_++;
  private_[id];
  return id;
}

void BlockPool::begin_capture(uint64_t id) {
  ENGINE_CHECK(capturing_ == 0, "BlockPool: a capture into pool ", capturing_,
               " is already under way");
  ENGINE_CHECK(private_.count(id), "BlockPool: no private pool ", id);
  capturing_ = id;
}

void BlockPool::end_capture() {
  capturing_ = 0;
}

void BlockPool::release_private(uint64_t id) {
  ENGINE_CHECK(capturing_ != id, "BlockPool: pool ", id, " released during its own capture");
  auto it = private_.find(id);
  if (it == private_.end()) return;
  for (auto& [cls, blocks] : it->second) {
    for (void* b : blocks) {
      cached_[cls].push_back(b);
      stats_.bytes_cached += cls;
      private_free_bytes_ -= cls;
    }
  }
  private_.erase(it);
}

}  // namespace engine
