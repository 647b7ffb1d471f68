// tests/comm/fake_torch_store.h: a server of torch >= 2.1's c10d TCPStore protocol for the tests of
// comm/rendezvous/torch_store.h (torch 2.x cannot be installed on our machines; torch 1.13's real
// server is tested beside it). It follows torch's two backends where they differ:
//   Backend  TCPStoreBackend.cpp: a connection whose first query is not VALIDATE is closed at once;
//            GET of a missing key closes the connection (tcpStore_.at throws).
//   LibUv    TCPStoreLibUvBackend.cpp (torch's default since 2.4): after a first query that is not
//            VALIDATE it keeps silent, and parses the buffered bytes again when more arrive, as
//            ordinary queries; keys longer than 8 KiB, values over 8 MiB and key counts over 128 Ki
//            close the connection; GET of a missing key answers an empty value.
// and misbehaving servers for the error tests:
//   Garbage  answers every read with 72 bytes of 0xff;  Closer closes every connection at once;
//   Silent   reads and never answers;  Lying  a Backend that answers CHECK with 7 and GET with a
//            length of 2^40.
// Query numbers: VALIDATE 0, SET 1, COMPARE_SET 2, GET 3, ADD 4, CHECK 5, WAIT 6, GETNUMKEYS 7,
// DELETE_KEY 8, APPEND 9, MULTI_GET 10, MULTI_SET 11, CANCEL_WAIT 12, PING 13.
#pragma once
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/transport/socket.h"

namespace engine::comm::testing {

class FakeTorchStore {
 public:
  enum class Mode { Backend, LibUv, Garbage, Closer, Silent, Lying };

  explicit FakeTorchStore(Mode mode) : mode_(mode) {
    listener_ = listen_tcp("127.0.0.1", 0, "fake torch store");
    port_ = listener_.local_port();
    thread_ = std::thread([this] { loop(); });
  }
  ~FakeTorchStore() {
    stop_ = true;
    thread_.join();
  }
  int port() const { return port_; }
  // As another client's SET.
  void set(const std::string& key, const std::string& value) {
    std::lock_guard lk(mu_);
    kv_[key] = value;
    wake(key);
  }
  bool has(const std::string& key) const {
    std::lock_guard lk(mu_);
    return kv_.count(key) > 0;
  }
  int accepted() const { return accepted_; }
  int closed_by_server() const { return closed_by_server_; }

 private:
  struct Client {
    Socket s;
    std::string buf;
    size_t commit = 0;
    bool misc = true;  // no query parsed yet
    size_t awaited = 0;
    bool dead = false;
  };
  // Reads a query's fields from a client's buffer; false when they have not all arrived.
  struct Reader {
    const std::string& b;
    size_t pos;
    template <class T>
    bool val(T* v) {
      if (pos + sizeof(T) > b.size()) return false;
      std::memcpy(v, b.data() + pos, sizeof(T));
      pos += sizeof(T);
      return true;
    }
    bool str(std::string* s, uint64_t max, bool* too_long) {
      uint64_t n;
      if (!val(&n)) return false;
      if (n > max) {
        *too_long = true;
        return false;
      }
      if (pos + n > b.size()) return false;
      *s = b.substr(pos, n);
      pos += n;
      return true;
    }
  };
  enum class Parse { Done, More, Close };

  void loop() {
    while (!stop_) {
      std::vector<pollfd> fds{{listener_.fd(), POLLIN, 0}};
      for (auto& c : clients_) fds.push_back({c->s.fd(), POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
      if (fds[0].revents) accept_one();
      for (size_t i = 1; i < fds.size(); ++i)
        if (fds[i].revents) read_one(*clients_[i - 1]);
      std::lock_guard lk(mu_);
      for (size_t i = 0; i < clients_.size();) {
        if (!clients_[i]->dead) {
          ++i;
          continue;
        }
        for (auto& [key, waiters] : waiting_) std::erase(waiters, clients_[i].get());
        clients_.erase(clients_.begin() + i);
      }
    }
  }

  void accept_one() {
    Socket s = accept_tcp(listener_);
    if (!s.valid()) return;
    ++accepted_;
    if (mode_ == Mode::Closer) return;  // closed as it goes out of scope
    auto c = std::make_unique<Client>();
    c->s = std::move(s);
    clients_.push_back(std::move(c));
  }

  void read_one(Client& c) {
    char tmp[4096];
    const ssize_t n = ::recv(c.s.fd(), tmp, sizeof tmp, 0);
    if (n <= 0) {
      c.dead = true;
      return;
    }
    if (mode_ == Mode::Silent) return;
    if (mode_ == Mode::Garbage) {
      const std::string junk(72, '\xff');
      (void)::send(c.s.fd(), junk.data(), junk.size(), MSG_NOSIGNAL);
      return;
    }
    c.buf.append(tmp, static_cast<size_t>(n));
    std::lock_guard lk(mu_);
    while (true) {  // one read event: parse from the last committed query, as libuv does
      Reader r{c.buf, c.commit};
      const Parse p = c.misc ? first_query(c, r) : query(c, r);
      if (p == Parse::More) return;
      if (p == Parse::Close) {
        ++closed_by_server_;
        c.dead = true;
        return;
      }
      c.commit = r.pos;
    }
  }

  Parse first_query(Client& c, Reader& r) {
    uint8_t cmd;
    if (!r.val(&cmd)) return Parse::More;
    uint32_t magic;
    if (mode_ != Mode::LibUv) {  // TCPStoreBackend: VALIDATE or the connection is closed
      if (cmd != 0) return Parse::Close;
      if (!r.val(&magic)) return Parse::More;
      c.misc = false;
      return magic == 0x3C85F7CE ? Parse::Done : Parse::Close;
    }
    c.misc = false;  // libuv forgets the connection's first-query state on the first read
    if (cmd != 0 || !r.val(&magic) || magic != 0x3C85F7CE) return Parse::More;  // silent
    return Parse::Done;
  }

  void send(Client& c, const std::string& bytes) {
    (void)::send(c.s.fd(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }
  template <class T>
  static std::string bytes_of(T v) {
    return std::string(reinterpret_cast<const char*>(&v), sizeof v);
  }

  // One query of an accepted connection (mu_ held).
  Parse query(Client& c, Reader& r) {
    const bool uv = mode_ == Mode::LibUv;
    const uint64_t max_key = uv ? 8 << 10 : ~0ull, max_value = uv ? 8 << 20 : ~0ull;
    uint8_t cmd;
    if (!r.val(&cmd)) return Parse::More;
    bool too_long = false;
    std::string key, value;
    auto more_or_close = [&] { return too_long ? Parse::Close : Parse::More; };
    switch (cmd) {
      case 1:  // SET
        if (!r.str(&key, max_key, &too_long) || !r.str(&value, max_value, &too_long))
          return more_or_close();
        kv_[key] = value;
        wake(key);
        return Parse::Done;
      case 3: {  // GET
        if (!r.str(&key, max_key, &too_long)) return more_or_close();
        auto it = kv_.find(key);
        if (it == kv_.end() && !uv) return Parse::Close;
        value = it == kv_.end() ? "" : it->second;
        const uint64_t n = mode_ == Mode::Lying ? 1ull << 40 : value.size();
        send(c, bytes_of(n) + value);
        return Parse::Done;
      }
      case 4: {  // ADD
        int64_t delta;
        if (!r.str(&key, max_key, &too_long) || !r.val(&delta)) return more_or_close();
        auto it = kv_.find(key);
        const int64_t v = delta + (it == kv_.end() ? 0 : std::stoll(it->second));
        kv_[key] = std::to_string(v);
        send(c, bytes_of(v));
        wake(key);
        return Parse::Done;
      }
      case 5:  // CHECK
      case 6:  // WAIT
        return keys_query(c, r, cmd == 6, max_key);
      case 7:  // GETNUMKEYS
        send(c, bytes_of<int64_t>(static_cast<int64_t>(kv_.size())));
        return Parse::Done;
      case 12:  // CANCEL_WAIT
        for (auto& [k, waiters] : waiting_) std::erase(waiters, &c);
        c.awaited = 0;
        send(c, std::string(1, '\x01'));
        return Parse::Done;
      case 13: {  // PING
        uint32_t nonce;
        if (!r.val(&nonce)) return Parse::More;
        send(c, bytes_of(nonce));
        return Parse::Done;
      }
      default:
        return Parse::Close;
    }
  }

  Parse keys_query(Client& c, Reader& r, bool wait, uint64_t max_key) {
    uint64_t n;
    if (!r.val(&n)) return Parse::More;
    if (n > (128u << 10)) return Parse::Close;  // libuv's MAX_KEY_COUNT; TCPStoreBackend: bad_alloc
    std::vector<std::string> keys(n);
    bool too_long = false;
    for (auto& k : keys)
      if (!r.str(&k, max_key, &too_long)) return too_long ? Parse::Close : Parse::More;
    size_t missing = 0;
    for (auto& k : keys) missing += kv_.count(k) ? 0 : 1;
    if (!wait) {
      send(c, std::string(1, mode_ == Mode::Lying ? '\x07' : missing ? '\x01' : '\x00'));
      return Parse::Done;
    }
    if (missing == 0) {
      send(c, std::string(1, '\x00'));
      return Parse::Done;
    }
    for (auto& k : keys)
      if (!kv_.count(k)) waiting_[k].push_back(&c);
    c.awaited = missing;
    return Parse::Done;
  }

  void wake(const std::string& key) {  // mu_ held
    auto it = waiting_.find(key);
    if (it == waiting_.end()) return;
    for (Client* c : it->second)
      if (--c->awaited == 0) send(*c, std::string(1, '\x00'));
    waiting_.erase(it);
  }

  const Mode mode_;
  Socket listener_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0}, closed_by_server_{0};
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Client>> clients_;
  std::map<std::string, std::string> kv_;
  std::map<std::string, std::vector<Client*>> waiting_;
};

}  // namespace engine::comm::testing
