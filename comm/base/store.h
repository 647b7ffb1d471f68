// comm/base/store.h: the rendezvous key-value Store (set / get / add / check / wait with timeout)
// that ranks use to find each other. Implementations: TcpStore (served by rank 0), FileStore (a
// directory on a shared filesystem) and MemStore (ranks as threads of one process).
// Values are byte strings. get() and wait() block until the keys exist or the timeout passes, then
// throw engine::TimeoutError naming the missing keys. Keys set once are never removed.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/base/deadline.h"

namespace engine::comm {

class Store {
 public:
  explicit Store(Millis timeout = Millis(300000)) : timeout_(timeout) {}
  virtual ~Store() = default;

  virtual void set(const std::string& key, const std::string& value) = 0;
  // Waits up to timeout() for the key.
  virtual std::string get(const std::string& key) = 0;
  // Adds delta to the integer stored at key (absent = 0) and returns the new value. get() of such
  // a key returns the decimal text.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // True when every key exists; never blocks.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Waits until every key exists; TimeoutError lists the keys still missing.
  virtual void wait(const std::vector<std::string>& keys, Millis timeout) = 0;
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

  // "tcp://host:port", "file:///path", "mem": for error messages.
  virtual std::string describe() const = 0;

  Millis timeout() const { return timeout_; }
  void set_timeout(Millis t) { timeout_ = t; }

 protected:
  // Message for a wait that timed out, listing the missing keys.
  std::string timeout_message(const std::vector<std::string>& missing, Millis timeout) const;

 private:
  Millis timeout_;
};

}  // namespace engine::comm
