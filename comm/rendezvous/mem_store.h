// comm/rendezvous/mem_store.h: an in-process Store for ranks that run as threads (tests). Share one
// std::shared_ptr<MemStore> between the threads.
#pragma once
#include <condition_variable>
#include <map>
#include <mutex>

#include "comm/base/store.h"

namespace engine::comm {

class MemStore : public Store {
 public:
  using Store::Store;
  using Store::wait;
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  std::string describe() const override { return "mem"; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> kv_;
};

}  // namespace engine::comm
