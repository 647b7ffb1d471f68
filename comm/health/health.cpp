// comm/health/health.cpp: see health.h.
#include "comm/health/health.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace engine::comm {

namespace {

constexpr uint32_t kMagic = 0x4B474E45;  // "ENGK"
constexpr uint32_t kQuery = 1, kVerdict = 2;
constexpr size_t kMaxVerdict = 4096;
constexpr Millis kServeDeadline{250};

struct Request {
  uint32_t magic, kind;
  uint64_t nonce;
  int32_t from;
  uint32_t length;
};
static_assert(sizeof(Request) == 24);

struct Reply {
  uint32_t magic;
  int32_t rank, pid, reserved;
  uint64_t started, completed;
};
static_assert(sizeof(Reply) == 32);

// Fields of /proc/<pid>/stat after the command name: [0] = state (field 3), [19] = start time.
std::vector<std::string> stat_fields(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return {};
  auto close = line.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream is(line.substr(close + 1));
  std::vector<std::string> out;
  for (std::string w; is >> w;) out.push_back(w);
  return out;
}

// The kernel's boot and this process's pid namespace: where both match, a peer's pid can be
// looked up in our /proc.
std::string boot_id() {
  std::string b;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> b;
  char ns[128] = {};
  ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
  return b + "/" + (n > 0 ? std::string(ns, n) : std::string("?"));
}

}  // namespace

HealthAddress self_health_address(const std::string& host, int port) {
  HealthAddress a;
  a.host = host;
  a.port = port;
  a.pid = static_cast<int>(getpid());
  auto f = stat_fields(a.pid);
  if (f.size() >= 20) a.start_time = std::strtoull(f[19].c_str(), nullptr, 10);
  a.boot_id = boot_id();
  return a;
}

std::string encode_health(const HealthAddress& a) {
  return a.host + "\n" + std::to_string(a.port) + "\n" + std::to_string(a.pid) + "\n" +
         std::to_string(a.start_time) + "\n" + a.boot_id;
}

HealthAddress decode_health(const std::string& s, int rank) {
  std::istringstream is(s);
  HealthAddress a;
  std::string port, pid, start;
  ENGINE_CHECK(std::getline(is, a.host) && std::getline(is, port) && std::getline(is, pid) &&
                   std::getline(is, start) && std::getline(is, a.boot_id),
               "rendezvous: malformed health entry of rank ", rank, " in the store");
  try {
    a.port = std::stoi(port);
    a.pid = std::stoi(pid);
    a.start_time = std::stoull(start);
  } catch (const std::exception&) {
    ENGINE_FAIL("rendezvous: malformed health entry of rank ", rank, " in the store");
  }
  return a;
}

ProcState local_process_state(const HealthAddress& a) {
  if (a.pid <= 0 || a.boot_id.empty() || a.boot_id != boot_id()) return ProcState::Unknown;
  auto f = stat_fields(a.pid);
  if (f.size() < 20) return ProcState::Gone;
  if (std::to_string(a.start_time) != f[19]) return ProcState::Gone;  // another process now
  const char st = f[0].empty() ? '?' : f[0][0];
  if (st == 'Z' || st == 'X' || st == 'x') return ProcState::Gone;
  if (st == 'T' || st == 't') return ProcState::Stopped;
  return ProcState::Running;
}

// ---------------------------------------------------------------------------------------------
// Server

HealthServer::HealthServer(int rank, const std::string& bind_host,
                           std::shared_ptr<Progress> progress)
    : rank_(rank), progress_(std::move(progress)) {
  listener_ = listen_tcp(bind_host, 0, "health endpoint of rank " + std::to_string(rank));
  port_ = listener_.local_port();
  ENGINE_CHECK(pipe2(stop_pipe_, O_CLOEXEC) == 0, "health endpoint of rank ", rank,
               ": pipe failed: ", errno_str(errno));
  thread_ = std::thread([this] { loop(); });
}

HealthServer::~HealthServer() {
  char c = 0;
  if (write(stop_pipe_[1], &c, 1) < 0) {
  }
  if (thread_.joinable()) thread_.join();
  ::close(stop_pipe_[0]);
  ::close(stop_pipe_[1]);
}

void HealthServer::set_nonce(uint64_t nonce) {
  nonce_.store(nonce);
}

std::pair<std::string, int> HealthServer::verdict() const {
  std::lock_guard lk(mu_);
  return {verdict_, verdict_from_};
}

void HealthServer::loop() {
  while (true) {
    pollfd fds[2] = {{listener_.fd(), POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents) return;
    // One short exchange at a time: a stranger holds the endpoint for at most kServeDeadline.
    for (Socket s = accept_tcp(listener_); s.valid(); s = accept_tcp(listener_)) {
      try {
        serve(s);
      } catch (const std::exception&) {
        // A peer that hung up or a stranger: nothing to answer.
      }
    }
  }
}

void HealthServer::serve(const Socket& s) {
  const Deadline dl = Deadline::after(kServeDeadline);
  Request q{};
  recv_all(s, &q, sizeof q, dl, "a health check");
  if (q.magic != kMagic || nonce_.load() == 0 || q.nonce != nonce_.load()) return;
  if (q.kind == kVerdict) {
    if (q.length > kMaxVerdict) return;
    std::string text(q.length, '\0');
    recv_all(s, text.data(), text.size(), dl, "a health check");
    std::lock_guard lk(mu_);
    if (verdict_from_ < 0) {
      verdict_ = std::move(text);
      verdict_from_ = q.from;
    }
  } else if (q.kind != kQuery) {
    return;
  }
  Reply r{kMagic,
          rank_,
          static_cast<int32_t>(getpid()),
          0,
          progress_->started.load(),
          progress_->completed.load()};
  send_all(s, &r, sizeof r, dl, "a health check");
}

// ---------------------------------------------------------------------------------------------
// Client

namespace {

// One check in flight: connect, send the request, read the answer.
struct Check {
  int index = -1;
  Socket s;
  std::string out;  // request bytes still to send
  Reply reply{};
  size_t got = 0;
  bool connected = false, done = false;
  Probe probe;
  void finish(ProbeResult r, std::string detail) {
    probe.result = r;
    probe.detail = std::move(detail);
    done = true;
    s.close();
  }
};

// Starts a non-blocking connect to a.host:a.port; false (and c.probe set) when it failed at once.
bool start_connect(Check& c, const HealthAddress& a) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (getaddrinfo(a.host.c_str(), std::to_string(a.port).c_str(), &hints, &res) != 0 || !res) {
    c.finish(ProbeResult::Unreachable, "cannot resolve " + a.host);
    return false;
  }
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    freeaddrinfo(res);
    c.finish(ProbeResult::Unreachable, "socket: " + errno_str(errno));
    return false;
  }
  c.s = Socket(fd);
  int rc = connect(fd, res->ai_addr, res->ai_addrlen);
  int err = errno;
  freeaddrinfo(res);
  if (rc == 0 || err == EINPROGRESS) return true;
  if (err == ECONNREFUSED || err == ECONNRESET)
    c.finish(ProbeResult::Refused, "connection refused");
  else
    c.finish(ProbeResult::Unreachable, "connect: " + errno_str(err));
  return false;
}

// Moves c forward after poll() said `revents`.
void step(Check& c, short revents) {
  if (!c.connected) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(c.s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err == ECONNREFUSED || err == ECONNRESET)
      return c.finish(ProbeResult::Refused, "connection refused");
    if (err != 0) return c.finish(ProbeResult::Unreachable, "connect: " + errno_str(err));
    if (!(revents & POLLOUT)) return;
    c.connected = true;
  }
  if (!c.out.empty()) {
    ssize_t n = send(c.s.fd(), c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EINTR)
      return c.finish(ProbeResult::Refused, "connection reset (" + errno_str(errno) + ")");
    if (n > 0) c.out.erase(0, n);
  }
  if (!(revents & (POLLIN | POLLHUP | POLLERR))) return;
  ssize_t n = recv(c.s.fd(), reinterpret_cast<char*>(&c.reply) + c.got, sizeof(Reply) - c.got,
                   MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
    return c.finish(ProbeResult::Refused, n == 0 ? "closed without an answer"
                                                 : "connection reset (" + errno_str(errno) + ")");
  if (n > 0) c.got += n;
  if (c.got < sizeof(Reply)) return;
  if (c.reply.magic != kMagic) return c.finish(ProbeResult::Refused, "answered with bad bytes");
  c.probe.reply = {c.reply.rank, c.reply.pid, c.reply.started, c.reply.completed};
  c.finish(ProbeResult::Answered, "");
}

// Runs one request against every peer but `from`; returns the checks by peer index.
std::vector<Check> exchange(const std::vector<HealthAddress>& peers, const std::vector<int>& to,
                            const std::string& request, Deadline deadline) {
  std::vector<Check> checks(peers.size());
  for (int i : to) {
    checks[i].index = i;
    checks[i].out = request;
    start_connect(checks[i], peers[i]);
  }
  while (true) {
    std::vector<pollfd> fds;
    std::vector<Check*> who;
    for (int i : to) {
      Check& c = checks[i];
      if (c.done) continue;
      short ev = POLLIN | (c.connected && c.out.empty() ? 0 : POLLOUT);
      fds.push_back({c.s.fd(), ev, 0});
      who.push_back(&c);
    }
    if (fds.empty()) break;
    if (deadline.expired()) {
      const std::string after = seconds_str(deadline.timeout());
      for (Check* c : who)
        c->finish(c->connected ? ProbeResult::Silent : ProbeResult::Unreachable,
                  c->connected ? "connected, but no answer within " + after
                               : "connect timed out after " + after);
      break;
    }
    if (poll(fds.data(), fds.size(), deadline.poll_ms(50)) < 0 && errno != EINTR) break;
    for (size_t k = 0; k < fds.size(); ++k)
      if (fds[k].revents) step(*who[k], fds[k].revents);
  }
  return checks;
}

std::string request_bytes(uint32_t kind, int from, uint64_t nonce, const std::string& text) {
  Request q{kMagic, kind, nonce, from, static_cast<uint32_t>(text.size())};
  std::string out(reinterpret_cast<const char*>(&q), sizeof q);
  return out + text;
}

}  // namespace

std::vector<Probe> probe_all(const std::vector<HealthAddress>& peers, int from, uint64_t nonce,
                             Deadline deadline) {
  std::vector<int> to;
  for (int i = 0; i < static_cast<int>(peers.size()); ++i)
    if (i != from) to.push_back(i);
  auto checks = exchange(peers, to, request_bytes(kQuery, from, nonce, ""), deadline);
  std::vector<Probe> out(peers.size());
  for (size_t i = 0; i < peers.size(); ++i) out[i] = std::move(checks[i].probe);
  if (from >= 0 && from < static_cast<int>(out.size())) out[from].result = ProbeResult::Answered;
  return out;
}

void tell_all(const std::vector<HealthAddress>& peers, const std::vector<int>& to, int from,
              uint64_t nonce, const std::string& text, Deadline deadline) {
  exchange(peers, to, request_bytes(kVerdict, from, nonce, text.substr(0, kMaxVerdict)), deadline);
}

}  // namespace engine::comm
