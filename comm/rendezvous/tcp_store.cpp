// comm/rendezvous/tcp_store.cpp: see tcp_store.h. Wire format, all integers little-endian host
// order:
//   hello   client -> server: u32 magic 'ENGS', u32 version; the server answers the same 8 bytes.
//   request u8 op, then: SET str key, str value        -> u8 0
//                        GET str key, i64 timeout_ms   -> u8 status (0 ok, 1 timeout), str value
//                        ADD str key, i64 delta        -> i64 new value
//                        CHECK u32 n, n x str          -> u8 (1 = all exist)
//                        WAIT u32 n, n x str, i64 ms   -> u8 status, u32 m, m x str (missing)
//   str = u32 length + bytes (keys at most 4 KiB, values 1 MiB: see tcp_store.h's bounds).
#include "comm/rendezvous/tcp_store.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>

#include "core/error.h"

namespace engine::comm {
namespace {

constexpr uint32_t kMagic = 0x53474E45;  // "ENGS"
constexpr uint32_t kVersion = 1;
// What a client may send (tcp_store.h): generous for a rank, small for rank 0's memory.
constexpr uint32_t kMaxKey = 4096;
constexpr uint32_t kMaxValue = 1u << 20;
constexpr uint32_t kMaxKeys = 1u << 17;  // keys of one WAIT or CHECK: a world's ranks
constexpr size_t kMaxRequest = 8u << 20;
constexpr size_t kMaxStored = 64u << 20;
constexpr size_t kPiece = 64u << 10;  // a string is read (and grown) this much at a time
constexpr int kLoggedRefusals = 20;
constexpr int64_t kMaxWaitMs = 7 * 24 * 3600 * 1000ll;  // a GET or WAIT's own timeout, clamped
enum Op : uint8_t { Set = 1, Get = 2, Add = 3, Check = 4, Wait = 5 };

template <class T>
void put(std::string& b, T v) {
  b.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void put_str(std::string& b, const std::string& s) {
  put<uint32_t>(b, static_cast<uint32_t>(s.size()));
  b += s;
}

// Reads from a reply string.
struct Cursor {
  const std::string& s;
  size_t pos = 0;
  template <class T>
  T get() {
    ENGINE_CHECK(pos + sizeof(T) <= s.size(), "store: short reply");
    T v;
    std::memcpy(&v, s.data() + pos, sizeof v);
    pos += sizeof v;
    return v;
  }
  std::string str() {
    auto n = get<uint32_t>();
    ENGINE_CHECK(pos + n <= s.size(), "store: short reply");
    std::string r = s.substr(pos, n);
    pos += n;
    return r;
  }
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Server

TcpStoreServer::TcpStoreServer(const std::string& bind_host, int port, StoreLimits limits)
    : limits_(limits) {
  listener_ = listen_tcp(bind_host, port, "rendezvous store (rank 0)");
  port_ = listener_.local_port();
  acceptor_ = std::thread([this] { accept_loop(); });
}

TcpStoreServer::~TcpStoreServer() {
  stop_ = true;
  cv_.notify_all();
  if (acceptor_.joinable()) acceptor_.join();
  for (auto& c : clients_)
    if (c.thread.joinable()) c.thread.join();
}

int TcpStoreServer::connections() const {
  std::lock_guard lk(threads_mu_);
  int n = 0;
  for (auto& c : clients_) n += c.done ? 0 : 1;
  return n;
}

void TcpStoreServer::refuse(const std::string& who, const std::string& why) {
  const int n = ++refusals_;
  if (n <= kLoggedRefusals)
    fprintf(stderr, "[engine comm] rendezvous store refused a connection from %s: %s\n",
            who.c_str(), why.c_str());
  if (n == kLoggedRefusals)
    fprintf(stderr, "[engine comm] rendezvous store: later refusals are not logged\n");
}

void TcpStoreServer::reap() {
  for (auto it = clients_.begin(); it != clients_.end();) {
    if (!it->done) {
      ++it;
      continue;
    }
    it->thread.join();
    it = clients_.erase(it);
  }
}

void TcpStoreServer::accept_loop() {
  while (!stop_) {
    pollfd p{listener_.fd(), POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    Socket s = accept_tcp(listener_);
    if (!s.valid()) continue;
    std::lock_guard lk(threads_mu_);
    if (stop_) break;
    reap();
    if (clients_.size() >= limits_.max_connections) {
      refuse(s.peer_str(), detail::concat("too many connections (", limits_.max_connections, ")"));
      continue;
    }
    Client& c = clients_.emplace_back();
    c.thread = std::thread([this, &c, s = std::move(s)]() mutable {
      serve(std::move(s));
      c.done = true;
    });
  }
}

void TcpStoreServer::serve(Socket s) {
  const std::string who = s.peer_str();
  // Every read is bounded: the handshake and each request by a deadline, a request by its bytes.
  std::optional<Deadline> deadline = Deadline::after(limits_.handshake);
  size_t budget = sizeof(uint32_t) * 2;
  std::string late =
      "no handshake within " + seconds_str(limits_.handshake) + " (not a rank of this job)";
  std::string why;
  auto read = [&](void* dst, size_t n) -> bool {
    if (n > budget) {
      why = "a request of more than " + std::to_string(kMaxRequest) + " bytes";
      return false;
    }
    budget -= n;
    for (auto* p = static_cast<char*>(dst); n > 0;) {
      if (stop_) return false;
      if (deadline && deadline->expired()) {
        why = late;
        return false;
      }
      pollfd pf{s.fd(), POLLIN, 0};
      int rc = poll(&pf, 1, 50);
      if (rc == 0 || (rc < 0 && errno == EINTR)) continue;
      ssize_t got = recv(s.fd(), p, n, 0);
      if (got == 0) return false;
      if (got < 0) {
        if (errno == EAGAIN || errno == EINTR) continue;
        return false;
      }
      p += got;
      n -= static_cast<size_t>(got);
    }
    return true;
  };
  uint32_t hello[2];
  if (!read(hello, sizeof hello)) {
    if (!stop_) refuse(who, why.empty() ? "no handshake (not a rank of this job)" : why);
    return;
  }
  if (hello[0] != kMagic || hello[1] != kVersion) {
    refuse(who, "bad handshake bytes (not a rank of this job)");
    return;
  }
  late = "a request incomplete " + seconds_str(limits_.request) + " after its first byte";
  try {
    send_all(s, hello, sizeof hello, Deadline::after(limits_.handshake), who);
    while (!stop_) {
      uint8_t op;
      deadline.reset();  // idle between requests
      budget = 1;
      if (!read(&op, 1)) return;
      deadline = Deadline::after(limits_.request);
      budget = kMaxRequest;
      std::string reply = handle(op, read, &why);
      if (!why.empty()) {
        if (!stop_) refuse(who, why);
        return;
      }
      send_all(s, reply.data(), reply.size(), Deadline::after(Millis(60000)), who);
    }
  } catch (const std::exception& e) {
    if (!stop_)
      fprintf(stderr, "[engine comm] rendezvous store: client %s: %s\n", who.c_str(), e.what());
  }
}

namespace {

// A request's fields, read through serve()'s bounded reader; *why says what was refused.
struct RequestReader {
  const std::function<bool(void*, size_t)>& read;
  std::string* why;

  bool fail(const std::string& w) const {
    if (why->empty()) *why = w;
    return false;
  }
  // A string of at most `max` bytes, read in pieces as they arrive.
  bool str(std::string* out, uint32_t max, const char* what) const {
    uint32_t n;
    if (!read(&n, 4)) return fail("malformed request");
    if (n > max) return fail(detail::concat("a ", what, " of ", n, " bytes (at most ", max, ")"));
    out->clear();
    for (size_t got = 0; got < n;) {
      const size_t k = std::min<size_t>(kPiece, n - got);
      out->resize(got + k);
      if (!read(out->data() + got, k)) return fail("malformed request");
      got += k;
    }
    return true;
  }
  bool keys(std::vector<std::string>* keys) const {
    uint32_t n;
    if (!read(&n, 4)) return fail("malformed request");
    if (n > kMaxKeys)
      return fail(detail::concat("a request for ", n, " keys (at most ", kMaxKeys, ")"));
    keys->clear();
    for (uint32_t i = 0; i < n; ++i)
      if (!str(&keys->emplace_back(), kMaxKey, "key")) return false;
    return true;
  }
  bool i64(int64_t* v) const { return read(v, 8) || fail("malformed request"); }
};

}  // namespace

std::vector<std::string> TcpStoreServer::missing_of(const std::vector<std::string>& keys) const {
  std::vector<std::string> m;
  for (auto& k : keys)
    if (!kv_.count(k)) m.push_back(k);
  return m;
}

std::string TcpStoreServer::wait_reply(bool get, const std::vector<std::string>& keys, int64_t ms) {
  std::string reply;
  std::unique_lock lk(mu_);
  bool all = cv_.wait_for(lk, Millis(std::clamp<int64_t>(ms, 0, kMaxWaitMs)),
                          [&] { return stop_ || missing_of(keys).empty(); });
  all = all && !stop_;
  put<uint8_t>(reply, all ? 0 : 1);
  if (get) {
    put_str(reply, all ? kv_[keys[0]] : std::string());
  } else {
    auto m = all ? std::vector<std::string>() : missing_of(keys);
    put<uint32_t>(reply, static_cast<uint32_t>(m.size()));
    for (auto& k : m) put_str(reply, k);
  }
  return reply;
}

bool TcpStoreServer::add(const std::string& key, int64_t by, int64_t* sum) {
  {
    std::lock_guard lk(mu_);
    auto it = kv_.find(key);
    const int64_t was = it == kv_.end() ? 0 : std::strtoll(it->second.c_str(), nullptr, 10);
    // Wraps around as two's complement (no undefined overflow from a stranger's delta).
    *sum = static_cast<int64_t>(static_cast<uint64_t>(was) + static_cast<uint64_t>(by));
    const std::string value = std::to_string(*sum);
    const size_t before = it == kv_.end() ? 0 : key.size() + it->second.size();
    if (stored_ - before + key.size() + value.size() > kMaxStored) return false;
    stored_ = stored_ - before + key.size() + value.size();
    kv_[key] = value;
  }
  cv_.notify_all();
  return true;
}

bool TcpStoreServer::set(const std::string& key, const std::string& value) {
  {
    std::lock_guard lk(mu_);
    auto it = kv_.find(key);
    const size_t old = it == kv_.end() ? 0 : key.size() + it->second.size();
    if (stored_ - old + key.size() + value.size() > kMaxStored) return false;
    stored_ = stored_ - old + key.size() + value.size();
    kv_[key] = value;
  }
  cv_.notify_all();
  return true;
}

std::string TcpStoreServer::handle(uint8_t op, const std::function<bool(void*, size_t)>& read,
                                   std::string* why) {
  const RequestReader in{read, why};
  std::string reply, key, value;
  std::vector<std::string> keys;
  int64_t arg;
  switch (op) {
    case Op::Set:
      if (!in.str(&key, kMaxKey, "key") || !in.str(&value, kMaxValue, "value")) return "";
      if (!set(key, value)) break;
      put<uint8_t>(reply, 0);
      return reply;
    case Op::Get:
      if (!in.str(&key, kMaxKey, "key") || !in.i64(&arg)) return "";
      return wait_reply(true, {key}, arg);
    case Op::Wait:
      if (!in.keys(&keys) || !in.i64(&arg)) return "";
      return wait_reply(false, keys, arg);
    case Op::Add: {
      int64_t sum = 0;
      if (!in.str(&key, kMaxKey, "key") || !in.i64(&arg)) return "";
      if (!add(key, arg, &sum)) break;
      put<int64_t>(reply, sum);
      return reply;
    }
    case Op::Check: {
      if (!in.keys(&keys)) return "";
      std::lock_guard lk(mu_);
      put<uint8_t>(reply, missing_of(keys).empty() ? 1 : 0);
      return reply;
    }
    default:
      *why = detail::concat("unknown request ", static_cast<int>(op));
      return "";
  }
  *why = detail::concat("the store is full (", kMaxStored >> 20, " MiB of keys and values)");
  return "";
}

// ---------------------------------------------------------------------------------------------
// Client

TcpStore::TcpStore(const std::string& host, int port, bool serve, Millis timeout,
                   const std::string& bind_host)
    : Store(timeout), host_(host), port_(port) {
  if (serve) {
    server_ = std::make_unique<TcpStoreServer>(bind_host, port);
    port_ = server_->port();
  }
  Deadline deadline = Deadline::after(timeout);
  try {
    // Rank 0 reaches its own server through the address the others use, so that the local address
    // of this connection (advertised to peers) is one they can reach.
    const bool any = is_any_address(bind_host);
    sock_ = connect_tcp(serve && !any ? bind_host : host_, port_, deadline,
                        "rendezvous store served by rank 0");
    uint32_t hello[2] = {kMagic, kVersion};
    send_all(sock_, hello, sizeof hello, deadline, describe());
    uint32_t back[2];
    recv_all(sock_, back, sizeof back, deadline, describe());
    ENGINE_CHECK(back[0] == kMagic && back[1] == kVersion, "rendezvous: ", describe(),
                 " is not an engine store (bad handshake)");
  } catch (const TimeoutError& e) {
    throw TimeoutError(detail::concat("rendezvous: rank 0 never arrived: ", e.what()));
  }
}

TcpStore::~TcpStore() {
  sock_.close();
  server_.reset();
}

std::string TcpStore::describe() const {
  return "tcp://" + host_ + ":" + std::to_string(port_);
}

std::string TcpStore::request(const std::string& req, Millis wait_part) {
  std::lock_guard lk(mu_);
  const std::string who = "the rendezvous store " + describe() + " (rank 0)";
  Deadline deadline = Deadline::after(wait_part + timeout() + Millis(5000));
  send_all(sock_, req.data(), req.size(), deadline, who);
  // Replies are read field by field; each op's parser below pulls what it needs.
  buf_.clear();
  auto need = [&](size_t n) {
    size_t old = buf_.size();
    buf_.resize(old + n);
    recv_all(sock_, buf_.data() + old, n, deadline, who);
  };
  uint8_t op = static_cast<uint8_t>(req[0]);
  switch (op) {
    case Op::Set:
    case Op::Check:
      need(1);
      break;
    case Op::Add:
      need(8);
      break;
    case Op::Get: {
      need(1 + 4);
      uint32_t n;
      std::memcpy(&n, buf_.data() + 1, 4);
      ENGINE_CHECK(n <= kMaxValue, who, " sent a value of ", n, " bytes (at most ", kMaxValue, ")");
      need(n);
      break;
    }
    case Op::Wait: {
      need(1 + 4);
      uint32_t m;
      std::memcpy(&m, buf_.data() + 1, 4);
      ENGINE_CHECK(m <= kMaxKeys, who, " named ", m, " missing keys (at most ", kMaxKeys, ")");
      for (uint32_t i = 0; i < m; ++i) {
        need(4);
        uint32_t n;
        std::memcpy(&n, buf_.data() + buf_.size() - 4, 4);
        ENGINE_CHECK(n <= kMaxKey, who, " sent a key of ", n, " bytes (at most ", kMaxKey, ")");
        need(n);
      }
      break;
    }
  }
  return buf_;
}

void TcpStore::set(const std::string& key, const std::string& value) {
  ENGINE_CHECK(key.size() <= kMaxKey && value.size() <= kMaxValue, "rendezvous store ", describe(),
               ": key '", key.substr(0, 64), "' (", key.size(), " bytes) with a value of ",
               value.size(), " bytes is over the store's bounds (", kMaxKey, " and ", kMaxValue,
               ")");
  std::string r;
  put<uint8_t>(r, Op::Set);
  put_str(r, key);
  put_str(r, value);
  request(r, Millis(0));
}

std::string TcpStore::get(const std::string& key) {
  std::string r;
  put<uint8_t>(r, Op::Get);
  put_str(r, key);
  put<int64_t>(r, timeout().count());
  std::string reply = request(r, timeout());
  Cursor c{reply};
  if (c.get<uint8_t>() != 0) throw TimeoutError(timeout_message({key}, timeout()));
  return c.str();
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  std::string r;
  put<uint8_t>(r, Op::Add);
  put_str(r, key);
  put<int64_t>(r, delta);
  std::string reply = request(r, Millis(0));
  return Cursor{reply}.get<int64_t>();
}

bool TcpStore::check(const std::vector<std::string>& keys) {
  std::string r;
  put<uint8_t>(r, Op::Check);
  put<uint32_t>(r, static_cast<uint32_t>(keys.size()));
  for (auto& k : keys) put_str(r, k);
  std::string reply = request(r, Millis(0));
  return Cursor{reply}.get<uint8_t>() == 1;
}

void TcpStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  std::string r;
  put<uint8_t>(r, Op::Wait);
  put<uint32_t>(r, static_cast<uint32_t>(keys.size()));
  for (auto& k : keys) put_str(r, k);
  put<int64_t>(r, timeout.count());
  std::string reply = request(r, timeout);
  Cursor c{reply};
  if (c.get<uint8_t>() == 0) return;
  std::vector<std::string> missing(c.get<uint32_t>());
  for (auto& k : missing) k = c.str();
  throw TimeoutError(timeout_message(missing, timeout));
}

}  // namespace engine::comm
