// comm/rendezvous/torch_store.cpp: see torch_store.h. The wire format, as torch's TCPStore.cpp and
// TCPStoreBackend.cpp / TCPStoreLibUvBackend.cpp write and read it (host byte order, x86 = LE):
//   SET         q, key, value                      -> (no answer)
//   GET         q, key                             -> value          (after a WAIT, as torch does)
//   ADD         q, key, i64 delta                  -> i64 new value  (stored as decimal text)
//   CHECK       q, u64 n, n keys                   -> u8 READY 0 / NOT_READY 1
//   WAIT        q, u64 n, n keys                   -> u8 STOP_WAITING 0, once every key exists
//   CANCEL_WAIT 12 (validated only)                -> u8 WAIT_CANCELED 1 (a STOP_WAITING may come
//   first) GETNUMKEYS  q                                  -> i64 VALIDATE    0, u32 0x3C85F7CE
//   (validated only, first query of a connection) -> (no answer)
// key and value = u64 length + bytes.
#include "comm/rendezvous/torch_store.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace engine::comm {
namespace {

// Legacy query numbers; a validated server's are these plus one.
enum class Query : uint8_t { Set = 0, Get = 2, Add = 3, Check = 4, Wait = 5, GetNumKeys = 6 };
constexpr uint8_t kValidate = 0;
constexpr uint8_t kCancelWait = 12;
constexpr uint32_t kValidationMagic = 0x3C85F7CE;
constexpr uint8_t kReady = 0, kNotReady = 1;            // CheckResponseType
constexpr uint8_t kStopWaiting = 0, kWaitCanceled = 1;  // WaitResponseType
constexpr uint64_t kMaxValueBytes = 64ull << 20;
// The probe: 9 GETNUMKEYS bytes first (a libuv server that parses them again as a WAIT reads its
// 8-byte key count from them), then one more per silent 100 ms, at most 64 in all.
constexpr int kProbeFirst = 9, kProbeMax = 64, kProbeSliceMs = 100;
constexpr int64_t kMaxKeyCount = int64_t(1) << 40;  // a "key count" beyond this is no answer

struct Msg {
  std::string b;
  Msg& u8(uint8_t v) {
    b.push_back(static_cast<char>(v));
    return *this;
  }
  template <class T>
  Msg& val(T v) {
    b.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  Msg& str(const std::string& s) {
    val<uint64_t>(s.size());
    b += s;
    return *this;
  }
};

// True when fd has something to read (data, EOF or an error) before the deadline.
bool readable(int fd, const Deadline& dl) {
  while (true) {
    pollfd p{fd, POLLIN, 0};
    const int rc = ::poll(&p, 1, dl.poll_ms());
    if (rc > 0) return true;
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0 || dl.expired()) return false;
  }
}

std::string keys_str(const std::vector<std::string>& keys) {
  std::string s;
  for (size_t i = 0; i < keys.size() && i < 4; ++i) s += (i ? ", '" : "'") + keys[i] + "'";
  if (keys.size() > 4) s += ", ... (" + std::to_string(keys.size()) + " keys)";
  return s;
}

const char* kNotTorch = ": not a PyTorch TCPStore?";

}  // namespace

const char* torch_protocol_name(TorchProtocol p) {
  switch (p) {
    case TorchProtocol::Unknown:
      return "unknown";
    case TorchProtocol::Legacy:
      return "torch < 2.1";
    case TorchProtocol::Validated:
      return "torch >= 2.1";
  }
  return "?";
}

std::string TorchStore::describe() const {
  std::string s = "torch TCPStore tcp://" + host_ + ":" + std::to_string(port_);
  return prefix_.empty() ? s : s + " (keys under " + prefix_ + "/)";
}

TorchProtocol TorchStore::protocol() const {
  std::lock_guard lk(mu_);
  return protocol_;
}

std::string TorchStore::local_host() const {
  std::lock_guard lk(mu_);
  return local_host_;
}

std::string TorchStore::wire_key(const std::string& key) const {
  // TCPStore puts "/" before every key; PrefixStore joins its prefix and the key with "/".
  return prefix_.empty() ? "/" + key : "/" + prefix_ + "/" + key;
}

// One operation under the lock: (re)connects when needed, runs body, and turns any failure into
// one error naming the store and the operation (the connection is then dropped, and the next
// operation reconnects).
template <class F>
auto TorchStore::call(const std::string& what, Millis wait_part, F&& body) {
  std::lock_guard lk(mu_);
  const Deadline dl = Deadline::after(wait_part + timeout());
  try {
    if (!sock_.valid()) connect(dl);
    return body(dl);
  } catch (const TimeoutError& e) {
    sock_.close();
    throw TimeoutError(detail::concat(describe(), ": ", what, ": ", e.what()));
  } catch (const Error& e) {
    sock_.close();
    throw Error(detail::concat(describe(), ": ", what, ": ", e.what()));
  }
}

TorchStore::TorchStore(const std::string& host, int port, const std::string& prefix, Millis timeout,
                       TorchProtocol protocol)
    : Store(timeout), host_(host), port_(port), prefix_(prefix), protocol_(protocol) {
  call("connect", Millis(0), [](const Deadline&) { return 0; });
}

TorchStore::~TorchStore() = default;

void TorchStore::connect(const Deadline& dl) {
  sock_ = connect_tcp(host_, port_, dl, "the server");
  local_host_ = sock_.local_host();
  if (protocol_ == TorchProtocol::Unknown) protocol_ = probe(dl);
  if (protocol_ == TorchProtocol::Validated) send_validate(dl);
}

// See torch_store.h: GETNUMKEYS bytes until the server answers (legacy) or closes (validated).
TorchProtocol TorchStore::probe(const Deadline& dl) {
  int sent = 0;
  auto send_probe = [&](int n) {
    const std::string bytes(n, static_cast<char>(Query::GetNumKeys));
    const ssize_t k = ::send(sock_.fd(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (k > 0) sent += static_cast<int>(k);  // a failed send: the server closed; recv says so
  };
  send_probe(kProbeFirst);
  std::string got;
  bool closed = false;
  while (sent == 0 || got.size() < static_cast<size_t>(8 * sent)) {
    if (!readable(sock_.fd(), Deadline::after(std::min(Millis(kProbeSliceMs), dl.remaining())))) {
      if (dl.expired())
        throw TimeoutError(detail::concat("no answer to GETNUMKEYS within ",
                                          seconds_str(dl.timeout()), kNotTorch));
      if (sent < kProbeMax) send_probe(1);
      continue;
    }
    char buf[1024];
    const ssize_t n = ::recv(sock_.fd(), buf, sizeof buf, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
    if (n <= 0) {
      closed = true;
      break;
    }
    got.append(buf, static_cast<size_t>(n));
  }
  if (closed && got.empty()) {  // a validated server: start again with VALIDATE
    sock_ = connect_tcp(host_, port_, dl, "the server");
    local_host_ = sock_.local_host();
    return TorchProtocol::Validated;
  }
  ENGINE_CHECK(!closed, "the server closed the connection after ", got.size(),
               " bytes of answers to GETNUMKEYS", kNotTorch);
  ENGINE_CHECK(got.size() == static_cast<size_t>(8 * sent), "the server answered ", got.size(),
               " bytes to ", sent, " GETNUMKEYS queries (", 8 * sent, " expected)", kNotTorch);
  for (size_t i = 0; i < got.size(); i += 8) {
    int64_t v;
    std::memcpy(&v, got.data() + i, 8);
    ENGINE_CHECK(v >= 0 && v < kMaxKeyCount, "the server answered GETNUMKEYS with ", v, kNotTorch);
  }
  return TorchProtocol::Legacy;
}

void TorchStore::send_validate(const Deadline& dl) {
  send(Msg().u8(kValidate).val<uint32_t>(kValidationMagic).b, dl);
}

uint8_t TorchStore::query(uint8_t legacy_number) const {
  return protocol_ == TorchProtocol::Validated ? legacy_number + 1 : legacy_number;
}

void TorchStore::send(const std::string& bytes, const Deadline& dl) {
  send_all(sock_, bytes.data(), bytes.size(), dl, "the server");
}

void TorchStore::recv(void* dst, size_t n, const Deadline& dl) {
  recv_all(sock_, dst, n, dl, "the server");
}

uint8_t TorchStore::recv_u8(const Deadline& dl) {
  uint8_t v;
  recv(&v, 1, dl);
  return v;
}

bool TorchStore::wait_reply(const Deadline& dl) {
  return readable(sock_.fd(), dl);
}

void TorchStore::set(const std::string& key, const std::string& value) {
  call("set '" + key + "'", Millis(0), [&](const Deadline& dl) {
    send(Msg().u8(query(uint8_t(Query::Set))).str(wire_key(key)).str(value).b, dl);
    return 0;
  });
}

std::string TorchStore::get(const std::string& key) {
  wait({key}, timeout());
  return call("get '" + key + "'", Millis(0), [&](const Deadline& dl) {
    send(Msg().u8(query(uint8_t(Query::Get))).str(wire_key(key)).b, dl);
    uint64_t n;
    recv(&n, 8, dl);
    ENGINE_CHECK(n <= kMaxValueBytes, "the server announced a value of ", n, " bytes (at most ",
                 kMaxValueBytes, " expected)", kNotTorch);
    std::string v(n, '\0');
    if (n > 0) recv(v.data(), n, dl);
    return v;
  });
}

int64_t TorchStore::add(const std::string& key, int64_t delta) {
  return call("add to '" + key + "'", Millis(0), [&](const Deadline& dl) {
    send(Msg().u8(query(uint8_t(Query::Add))).str(wire_key(key)).val<int64_t>(delta).b, dl);
    int64_t v;
    recv(&v, 8, dl);
    return v;
  });
}

bool TorchStore::check(const std::vector<std::string>& keys) {
  return call("check " + keys_str(keys), Millis(0), [&](const Deadline& dl) {
    Msg m;
    m.u8(query(uint8_t(Query::Check))).val<uint64_t>(keys.size());
    for (const auto& k : keys) m.str(wire_key(k));
    send(m.b, dl);
    const uint8_t r = recv_u8(dl);
    ENGINE_CHECK(r == kReady || r == kNotReady, "the server answered ", int(r),
                 " to CHECK (READY 0 or NOT_READY 1 expected)", kNotTorch);
    return r == kReady;
  });
}

void TorchStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  const bool arrived = call("wait for " + keys_str(keys), timeout, [&](const Deadline& dl) {
    Msg m;
    m.u8(query(uint8_t(Query::Wait))).val<uint64_t>(keys.size());
    for (const auto& k : keys) m.str(wire_key(k));
    send(m.b, dl);
    if (wait_reply(Deadline::after(timeout))) {
      const uint8_t r = recv_u8(dl);
      ENGINE_CHECK(r == kStopWaiting, "the server answered ", int(r),
                   " to WAIT (STOP_WAITING 0 expected)", kNotTorch);
      return true;
    }
    if (protocol_ == TorchProtocol::Legacy) {
      sock_.close();  // a legacy wait cannot be cancelled: its late answer would be misread
      return false;
    }
    bool late = false;
    cancel_wait(dl, &late);
    return late;
  });
  if (arrived) return;
  std::vector<std::string> missing;
  try {
    for (const auto& k : keys)
      if (!check({k})) missing.push_back(k);
  } catch (const Error&) {
    missing = keys;
  }
  throw TimeoutError(timeout_message(missing.empty() ? keys : missing, timeout));
}

// As torch's doWait: CANCEL_WAIT answers WAIT_CANCELED, after a STOP_WAITING when the keys
// arrived in the meantime.
void TorchStore::cancel_wait(const Deadline& dl, bool* keys_arrived) {
  send(Msg().u8(kCancelWait).b, dl);
  uint8_t r = recv_u8(dl);
  *keys_arrived = r == kStopWaiting;
  if (*keys_arrived) r = recv_u8(dl);
  ENGINE_CHECK(r == kWaitCanceled, "the server answered ", int(r),
               " to CANCEL_WAIT (WAIT_CANCELED 1 expected)", kNotTorch);
}

std::shared_ptr<Store> torch_agent_store_from_env(const std::string& host, int port,
                                                  Millis timeout) {
  const char* use = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  if (!use || std::string(use) != "True") return nullptr;  // torch compares with str(True)
  const char* attempt = std::getenv("TORCHELASTIC_RESTART_COUNT");
  ENGINE_CHECK(attempt && *attempt,
               "TORCHELASTIC_USE_AGENT_STORE=True (torchrun's static rendezvous) but "
               "TORCHELASTIC_RESTART_COUNT is not set");
  return std::make_shared<TorchStore>(host, port, std::string("/worker/attempt_") + attempt,
                                      timeout);
}

}  // namespace engine::comm
