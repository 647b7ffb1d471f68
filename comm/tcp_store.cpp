// comm/tcp_store.cpp: see tcp_store.h. Wire format, all integers little-endian host order:
//   hello   client -> server: u32 magic 'ENGS', u32 version; the server answers the same 8 bytes.
//   request u8 op, then: SET str key, str value        -> u8 0
//                        GET str key, i64 timeout_ms   -> u8 status (0 ok, 1 timeout), str value
//                        ADD str key, i64 delta        -> i64 new value
//                        CHECK u32 n, n x str          -> u8 (1 = all exist)
//                        WAIT u32 n, n x str, i64 ms   -> u8 status, u32 m, m x str (missing)
//   str = u32 length (at most 64 MiB) + bytes.
#include "comm/tcp_store.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>

#include "core/error.h"

namespace engine::comm {
namespace {

constexpr uint32_t kMagic = 0x53474E45;  // "ENGS"
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxStr = 64u << 20;
constexpr uint32_t kMaxKeys = 1u << 16;
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

TcpStoreServer::TcpStoreServer(const std::string& bind_host, int port) {
  listener_ = listen_tcp(bind_host, port, "rendezvous store (rank 0)");
  port_ = listener_.local_port();
  acceptor_ = std::thread([this] { accept_loop(); });
}

TcpStoreServer::~TcpStoreServer() {
  stop_ = true;
  cv_.notify_all();
  if (acceptor_.joinable()) acceptor_.join();
  for (auto& t : clients_)
    if (t.joinable()) t.join();
}

void TcpStoreServer::accept_loop() {
  while (!stop_) {
    pollfd p{listener_.fd(), POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    Socket s = accept_tcp(listener_);
    if (!s.valid()) continue;
    std::lock_guard lk(threads_mu_);
    if (stop_) break;
    clients_.emplace_back([this, s = std::move(s)]() mutable { serve(std::move(s)); });
  }
}

void TcpStoreServer::serve(Socket s) {
  const std::string who = s.peer_str();
  // Reads exactly n bytes; false on EOF, error, stop, or (during the handshake) a 10 s silence.
  bool in_handshake = true;
  Deadline hello_deadline = Deadline::after(Millis(10000));
  auto read = [&](void* dst, size_t n) -> bool {
    auto* p = static_cast<char*>(dst);
    while (n > 0) {
      if (stop_) return false;
      if (in_handshake && hello_deadline.expired()) return false;
      pollfd pf{s.fd(), POLLIN, 0};
      int rc = poll(&pf, 1, 50);
      if (rc == 0) continue;
      if (rc < 0 && errno == EINTR) continue;
      ssize_t got = recv(s.fd(), p, n, 0);
      if (got == 0) return false;
      if (got < 0) {
        if (errno == EAGAIN || errno == EINTR) continue;
        return false;
      }
      p += got;
      n -= got;
    }
    return true;
  };
  auto refuse = [&](const char* why) {
    fprintf(stderr, "[engine comm] rendezvous store refused a connection from %s: %s\n",
            who.c_str(), why);
  };
  uint32_t hello[2];
  if (!read(hello, sizeof hello)) {
    if (!stop_) refuse("no handshake (not a rank of this job)");
    return;
  }
  if (hello[0] != kMagic || hello[1] != kVersion) {
    refuse("bad handshake bytes (not a rank of this job)");
    return;
  }
  in_handshake = false;
  try {
    send_all(s, hello, sizeof hello, Deadline::after(Millis(10000)), who);
    while (!stop_) {
      uint8_t op;
      if (!read(&op, 1)) return;
      bool ok = true;
      std::string reply = handle(op, read, &ok);
      if (!ok) {
        if (!stop_) refuse("malformed request");
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

// A request's fields, read through serve()'s bounded reader.
struct RequestReader {
  const std::function<bool(void*, size_t)>& read;

  bool str(std::string* out) const {
    uint32_t n;
    if (!read(&n, 4) || n > kMaxStr) return false;
    out->resize(n);
    return n == 0 || read(out->data(), n);
  }
  bool keys(std::vector<std::string>* keys) const {
    uint32_t n;
    if (!read(&n, 4) || n > kMaxKeys) return false;
    keys->resize(n);
    for (auto& k : *keys)
      if (!str(&k)) return false;
    return true;
  }
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
  bool all = cv_.wait_for(lk, Millis(std::max<int64_t>(ms, 0)),
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

int64_t TcpStoreServer::add(const std::string& key, int64_t by) {
  int64_t v = by;
  {
    std::lock_guard lk(mu_);
    auto it = kv_.find(key);
    if (it != kv_.end()) v += std::strtoll(it->second.c_str(), nullptr, 10);
    kv_[key] = std::to_string(v);
  }
  cv_.notify_all();
  return v;
}

std::string TcpStoreServer::handle(uint8_t op, const std::function<bool(void*, size_t)>& read,
                                   bool* ok) {
  const RequestReader in{read};
  std::string reply, key, value;
  std::vector<std::string> keys;
  int64_t arg;
  switch (op) {
    case Op::Set:
      if (!in.str(&key) || !in.str(&value)) break;
      {
        std::lock_guard lk(mu_);
        kv_[key] = value;
      }
      cv_.notify_all();
      put<uint8_t>(reply, 0);
      return reply;
    case Op::Get:
      if (!in.str(&key) || !read(&arg, 8)) break;
      return wait_reply(true, {key}, arg);
    case Op::Wait:
      if (!in.keys(&keys) || !read(&arg, 8)) break;
      return wait_reply(false, keys, arg);
    case Op::Add:
      if (!in.str(&key) || !read(&arg, 8)) break;
      put<int64_t>(reply, add(key, arg));
      return reply;
    case Op::Check: {
      if (!in.keys(&keys)) break;
      std::lock_guard lk(mu_);
      put<uint8_t>(reply, missing_of(keys).empty() ? 1 : 0);
      return reply;
    }
    default:
      break;
  }
  *ok = false;
  return reply;
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
    const bool any = bind_host.empty() || bind_host == "0.0.0.0";
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
      need(n);
      break;
    }
    case Op::Wait: {
      need(1 + 4);
      uint32_t m;
      std::memcpy(&m, buf_.data() + 1, 4);
      for (uint32_t i = 0; i < m; ++i) {
        need(4);
        uint32_t n;
        std::memcpy(&n, buf_.data() + buf_.size() - 4, 4);
        need(n);
      }
      break;
    }
  }
  return buf_;
}

void TcpStore::set(const std::string& key, const std::string& value) {
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
