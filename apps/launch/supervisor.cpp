// apps/launch/supervisor.cpp: see supervisor.h.
//
// One thread does everything: poll() on every rank's stdout and stderr pipes plus a wake-up pipe
// (poked by signal handlers), then waitpid(WNOHANG) on each running rank. Each rank runs in its own
// process group, so a signal reaches whatever it started too, and with PR_SET_PDEATHSIG so it dies
// if launch itself is killed.
#include "apps/launch/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <sstream>

#include "comm/rendezvous/membership.h"
#include "core/threads.h"

extern char** environ;

namespace engine::launch {
namespace {

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// Writes all of `s` to fd; gives up silently if the reader has gone (EPIPE).
void write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 100);
    } else if (!(n < 0 && errno == EINTR)) {
      return;
    }
  }
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + "); exit code " +
           std::to_string(128 + sig);
  }
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

int exit_code_of(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

// Runs in the child between fork and exec: async-signal-safe calls only.
[[noreturn]] void exec_child(pid_t parent, int out_w, int err_w, char* const argv[],
                             char* const envp[]) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(128 + SIGKILL);  // launch died before prctl took effect
  if (dup2(out_w, STDOUT_FILENO) < 0 || dup2(err_w, STDERR_FILENO) < 0) _exit(127);
  // Dispositions launch set (SIG_IGN survives exec) and its signal mask must not leak into ranks.
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE}) signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execvpe(argv[0], argv, envp);
  const int err = errno;
  const char* parts[] = {"launch: cannot run '", argv[0], "': ", strerror(err), "\n"};
  for (const char* p : parts) {
    if (::write(STDERR_FILENO, p, strlen(p)) < 0) break;
  }
  _exit(127);
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// torchrun's variables of a (re)start: TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS.
std::vector<std::string> restart_environment(int restart_count, int max_restarts) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    if (entry.rfind("TORCHELASTIC_RESTART_COUNT=", 0) == 0 ||
        entry.rfind("TORCHELASTIC_MAX_RESTARTS=", 0) == 0)
      continue;
    env.push_back(entry);
  }
  env.push_back("TORCHELASTIC_RESTART_COUNT=" + std::to_string(restart_count));
  env.push_back("TORCHELASTIC_MAX_RESTARTS=" + std::to_string(max_restarts));
  return env;
}

}  // namespace

Supervisor::Supervisor(LaunchOptions opts, int out_fd, int err_fd)
    : opts_(std::move(opts)), out_fd_(out_fd), err_fd_(err_fd) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
    throw std::runtime_error(std::string("launch: pipe: ") + strerror(errno));
  wake_r_ = fds[0];
  wake_w_ = fds[1];
}

Supervisor::~Supervisor() {
  // Only reached with ranks alive if run() threw: leave nothing behind.
  for (Rank& r : ranks_) {
    if (r.running) {
      ::kill(-r.pid, SIGKILL);
      ::waitpid(r.pid, nullptr, 0);
    }
    close_fd(r.out_fd);
    close_fd(r.err_fd);
  }
  close_fd(wake_r_);
  close_fd(wake_w_);
}

void Supervisor::wake() noexcept {
  const char b = 1;
  const int saved = errno;
  (void)!::write(wake_w_, &b, 1);  // full pipe: a wake-up is pending anyway
  errno = saved;
}

void Supervisor::request_stop(int sig) noexcept {
  stop_signal_.store(sig);
  stop_requests_.fetch_add(1);
  wake();
}

void Supervisor::note(const std::string& line) {
  write_all(err_fd_, "launch: " + line + "\n");
}

void Supervisor::spawn(Rank& r, const std::vector<std::string>& env_in) {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error(strerror(errno));
  if (pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(out[0]);
    ::close(out[1]);
    throw std::runtime_error(strerror(e));
  }
  std::vector<std::string> args = opts_.command, env = env_in;
  std::vector<char*> argv = c_strings(args), envp = c_strings(env);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) exec_child(parent, out[1], err[1], argv.data(), envp.data());
  const int fork_errno = errno;
  ::close(out[1]);
  ::close(err[1]);
  if (pid < 0) {
    ::close(out[0]);
    ::close(err[0]);
    throw std::runtime_error(std::string("fork: ") + strerror(fork_errno));
  }
  setpgid(pid, pid);  // also done by the child: whichever runs first wins the race
  r.pid = pid;
  r.running = true;
  r.out_fd = out[0];
  r.err_fd = err[0];
  fcntl(r.out_fd, F_SETFL, O_NONBLOCK);
  fcntl(r.err_fd, F_SETFL, O_NONBLOCK);
}

void Supervisor::signal_all(int sig) {
  for (const Rank& r : ranks_)
    if (r.running) ::kill(-r.pid, sig);
}

void Supervisor::begin_stop(int sig, const std::string& why) {
  if (!why.empty()) note(why);
  signal_all(sig);
  if (!stopping_) {
    stopping_ = true;
    kill_at_ = now_s() + opts_.grace_s;
  }
}

void Supervisor::read_from(int& fd, LinePrefixer& lp, std::string& sink) {
  char buf[65536];
  for (int reads = 0; reads < 16; ++reads) {  // bounded: one busy rank must not starve the rest
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      lp.feed(std::string_view(buf, static_cast<size_t>(n)), sink);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      return;
    } else {  // end of stream (or a read error, treated alike)
      lp.flush(sink);
      close_fd(fd);
      return;
    }
  }
}

void Supervisor::pump(int timeout_ms) {
  std::vector<pollfd> fds{{wake_r_, POLLIN, 0}};
  for (const Rank& r : ranks_) {
    if (r.out_fd >= 0) fds.push_back({r.out_fd, POLLIN, 0});
    if (r.err_fd >= 0) fds.push_back({r.err_fd, POLLIN, 0});
  }
  if (::poll(fds.data(), fds.size(), timeout_ms) < 0) return;  // EINTR: the caller loops
  char drain[256];
  while (::read(wake_r_, drain, sizeof drain) > 0) {
  }
  std::string out, err;
  for (Rank& r : ranks_) {
    for (const pollfd& p : fds) {
      if (p.revents == 0) continue;
      if (p.fd == r.out_fd) read_from(r.out_fd, r.out, out);
      if (p.fd == r.err_fd) read_from(r.err_fd, r.err, err);
    }
  }
  if (!out.empty()) write_all(out_fd_, out);
  if (!err.empty()) write_all(err_fd_, err);
}

void Supervisor::reap() {
  for (Rank& r : ranks_) {
    if (!r.running) continue;
    int status = 0;
    const pid_t got = ::waitpid(r.pid, &status, WNOHANG);
    if (got != r.pid) continue;
    r.running = false;
    // What it wrote before exiting is all in its pipes now: print it before any note about it.
    std::string out, err;
    if (r.out_fd >= 0) read_from(r.out_fd, r.out, out);
    if (r.err_fd >= 0) read_from(r.err_fd, r.err, err);
    write_all(out_fd_, out);
    write_all(err_fd_, err);
    if (exit_code_of(status) == 0) completed_ = true;
    if (exit_code_of(status) == 0 || failed_) continue;
    if (stop_requests_seen_ > 0) continue;  // stopping on launch's own signal: not a failure
    if (opts_.keep_going) {
      if (lost_code_ == 0) lost_code_ = exit_code_of(status);
      note("rank " + std::to_string(r.rank) + " (pid " + std::to_string(r.pid) + ") " +
           describe_exit(status) + "; the others go on (--on-rank-loss continue)");
      if (WIFSIGNALED(status)) replace(r);
      continue;
    }
    failed_ = true;
    exit_code_ = exit_code_of(status);
    begin_stop(SIGTERM, "rank " + std::to_string(r.rank) + " (pid " + std::to_string(r.pid) + ") " +
                            describe_exit(status) + "; stopping the other ranks");
  }
}

bool Supervisor::any_running() const {
  for (const Rank& r : ranks_)
    if (r.running) return true;
  return false;
}

bool Supervisor::any_pipe_open() const {
  for (const Rank& r : ranks_)
    if (r.out_fd >= 0 || r.err_fd >= 0) return true;
  return false;
}

int Supervisor::run() {
  for (int restart = 0;; ++restart) {
    const int code = run_attempt(restart);
    if (!failed_ || stop_requests_.load() > 0 || restart >= opts_.max_restarts) return code;
    note("restarting every rank (restart " + std::to_string(restart + 1) + " of " +
         std::to_string(opts_.max_restarts) + ")");
    ranks_.clear();
    exit_code_ = 0;
    failed_ = stopping_ = killed_ = false;
  }
}

void Supervisor::serve_store() {
  const JobShape& job = opts_.job;
  if (job.node_rank == 0 && !store_server_)
    store_server_ = std::make_unique<comm::TcpStoreServer>(job.master_addr, job.master_port);
  if (!watch_)
    watch_ =
        std::make_unique<MembershipWatch>(job.master_addr, job.master_port, [this] { wake(); });
}

void Supervisor::end_fenced() {
  for (const MembershipWatch::Generation& g : watch_->take()) {
    for (Rank& r : ranks_) {
      const bool in = std::find(g.ids.begin(), g.ids.end(), r.rank) != g.ids.end();
      if (in) r.member = true;  // a replacement's admission
      if (!r.running || in || !r.member) continue;
      note("rank " + std::to_string(r.rank) + " (pid " + std::to_string(r.pid) +
           ") was left out of generation " + std::to_string(g.number) + " (fenced); ending it");
      ::kill(-r.pid, SIGKILL);
    }
  }
  if (const std::string why = watch_->failure(); !why.empty() && !watch_failed_) {
    watch_failed_ = true;
    note("cannot watch the job's membership: " + why);
  }
}

void Supervisor::end_unadmitted() {
  if (opts_.job.nnodes != 1 || completed_ || unadmitted_ended_) return;  // elsewhere: its timeout
  bool waiting = false;
  for (const Rank& r : ranks_) {
    if (r.running && r.member) return;  // a member can still admit them
    waiting = waiting || r.running;
  }
  if (!waiting) return;
  unadmitted_ended_ = true;
  note("no member of the job is left to admit the ranks started again; ending them");
  for (Rank& r : ranks_)
    if (r.running) ::kill(-r.pid, SIGKILL);
}

bool Supervisor::replace(Rank& r) {
  constexpr int kReplacements = 3;  // a rank that keeps failing at once is not started forever
  if (completed_ || unadmitted_ended_ || r.replaced >= kReplacements || stop_requests_seen_ > 0)
    return false;
  ++r.replaced;
  r.member = false;
  close_fd(r.out_fd);
  close_fd(r.err_fd);
  try {
    spawn(r, rank_environment(opts_.job, r.local, cores_, env_));
  } catch (const std::exception& e) {
    note("cannot start rank " + std::to_string(r.rank) + " again: " + e.what());
    return false;
  }
  note("rank " + std::to_string(r.rank) + " started again (pid " + std::to_string(r.pid) +
       ", replacement " + std::to_string(r.replaced) + " of " + std::to_string(kReplacements) +
       "): the others admit it at a step boundary");
  return true;
}

int Supervisor::run_attempt(int restart_count) {
  const JobShape& job = opts_.job;
  std::vector<std::string> base = restart_environment(restart_count, opts_.max_restarts);
  if (opts_.keep_going) {
    base.push_back("ENGINE_AGENT_STORE=1");
    serve_store();
  }
  cores_ = usable_cores();
  env_ = base;
  ranks_.reserve(job.nproc_per_node);
  for (int local = 0; local < job.nproc_per_node; ++local) {
    ranks_.emplace_back(job.node_rank * job.nproc_per_node + local, local);
    try {
      spawn(ranks_.back(), rank_environment(job, local, cores_, base));
    } catch (const std::exception& e) {
      failed_ = true;
      exit_code_ = 1;
      begin_stop(SIGTERM, "cannot start rank " + std::to_string(ranks_.back().rank) + ": " +
                              e.what() + "; stopping the other ranks");
      break;
    }
  }

  while (any_running()) {
    int timeout_ms = 100;  // backstop: a SIGCHLD handler is optional
    if (stopping_ && !killed_) {
      const double left_ms = (kill_at_ - now_s()) * 1000;
      if (left_ms < timeout_ms) timeout_ms = left_ms > 0 ? static_cast<int>(left_ms) : 0;
    }
    pump(timeout_ms);
    const int requests = stop_requests_.load();
    if (requests > stop_requests_seen_) {
      const int sig = stop_signal_.load();
      if (stop_requests_seen_ == 0 && !failed_) exit_code_ = 128 + sig;
      if (stop_requests_seen_ > 0 || stopping_) {
        killed_ = true;
        signal_all(SIGKILL);
      } else {
        begin_stop(sig, std::string("got signal ") + std::to_string(sig) + " (" + strsignal(sig) +
                            "); forwarding it to the ranks");
      }
      stop_requests_seen_ = requests;
    }
    reap();
    if (watch_) end_fenced();
    if (opts_.keep_going) end_unadmitted();
    if (stopping_ && !killed_ && now_s() >= kill_at_ && any_running()) {
      std::ostringstream msg;
      msg << "ranks still running " << opts_.grace_s
          << " s after being told to stop; sending SIGKILL";
      note(msg.str());
      killed_ = true;
      signal_all(SIGKILL);
    }
  }

  // Every rank has exited. Whatever they left in their process groups goes too, and then the
  // pipes reach end of stream (bounded, in case a straggler left its group). A group id is not
  // reused while the group has members, so this reaches only our ranks' leftovers.
  for (const Rank& r : ranks_)
    if (r.pid > 0) ::kill(-r.pid, SIGKILL);
  const double drain_until = now_s() + 1.0;
  while (any_pipe_open() && now_s() < drain_until) pump(50);
  std::string out, err;
  for (Rank& r : ranks_) {
    if (r.out_fd >= 0) r.out.flush(out);
    if (r.err_fd >= 0) r.err.flush(err);
    close_fd(r.out_fd);
    close_fd(r.err_fd);
  }
  write_all(out_fd_, out);
  write_all(err_fd_, err);
  if (opts_.keep_going && exit_code_ == 0) return completed_ ? 0 : lost_code_;
  return exit_code_;
}

}  // namespace engine::launch
