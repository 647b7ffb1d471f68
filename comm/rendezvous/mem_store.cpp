// comm/rendezvous/mem_store.cpp: see mem_store.h.
#include "comm/rendezvous/mem_store.h"

#include "core/error.h"

namespace engine::comm {

void MemStore::set(const std::string& key, const std::string& value) {
  {
    std::lock_guard lk(mu_);
    kv_[key] = value;
  }
  cv_.notify_all();
}

std::string MemStore::get(const std::string& key) {
  wait({key}, timeout());
  std::lock_guard lk(mu_);
  return kv_.at(key);
}

int64_t MemStore::add(const std::string& key, int64_t delta) {
  int64_t v;
  {
    std::lock_guard lk(mu_);
    auto it = kv_.find(key);
    v = (it == kv_.end() ? 0 : std::stoll(it->second)) + delta;
    kv_[key] = std::to_string(v);
  }
  cv_.notify_all();
  return v;
}

bool MemStore::check(const std::vector<std::string>& keys) {
  std::lock_guard lk(mu_);
  for (auto& k : keys)
    if (!kv_.count(k)) return false;
  return true;
}

void MemStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  std::unique_lock lk(mu_);
  auto all = [&] {
    for (auto& k : keys)
      if (!kv_.count(k)) return false;
    return true;
  };
  if (cv_.wait_for(lk, timeout, all)) return;
  std::vector<std::string> missing;
  for (auto& k : keys)
    if (!kv_.count(k)) missing.push_back(k);
  throw TimeoutError(timeout_message(missing, timeout));
}

}  // namespace engine::comm
