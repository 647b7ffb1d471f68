// apps/launch/supervisor.h: starts a job's local ranks and watches them until the job ends:
// prefixed output, the first failure stops the rest, signals are forwarded, every child is reaped.
#pragma once
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "apps/launch/line_prefixer.h"
#include "apps/launch/membership_watch.h"
#include "apps/launch/rank_env.h"
#include "comm/rendezvous/tcp_store.h"

namespace engine::launch {

struct LaunchOptions {
  JobShape job;
  std::vector<std::string> command;  // program and its arguments, run once per local rank
  double grace_s = 10.0;             // SIGTERM -> SIGKILL delay when stopping ranks
  // torchrun's --max-restarts: when a rank fails, stop every rank and start them all again, up
  // to this many times; each start sees TORCHELASTIC_RESTART_COUNT (0, 1, ...).
  int max_restarts = 0;
  // --on-rank-loss continue: launch serves the job's store (node 0; the ranks are its clients, told
  // by ENGINE_AGENT_STORE=1), so that it outlives any rank; a failed rank does not stop the others;
  // a local rank the others left out of a generation (fenced) is ended; the job succeeds when a
  // rank completes.
  bool keep_going = false;
};

class Supervisor {
 public:
  // Ranks' output goes to out_fd (their stdout) and err_fd (their stderr); so do launch's notes
  // (to err_fd).
  explicit Supervisor(LaunchOptions opts, int out_fd = STDOUT_FILENO, int err_fd = STDERR_FILENO);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Starts the ranks and returns when all have been reaped. The result is launch's exit code:
  // 0 if every rank exited 0; else the code of the first rank that failed (128 + signal number
  // for a rank killed by a signal); else 128 + sig after request_stop(sig). A failure (not a
  // stop request) starts every rank again while restarts are left; the result is the last
  // start's.
  int run();

  // Async-signal-safe. Forwards `sig` to every rank, then SIGKILL after the grace period. A
  // request while ranks are already being stopped (a second Ctrl-C) sends SIGKILL at once.
  void request_stop(int sig) noexcept;
  // Async-signal-safe: a rank may have exited (call it from a SIGCHLD handler).
  void wake() noexcept;

 private:
  struct Rank {
    int rank = 0;
    int local = 0;       // its index on this node
    int replaced = 0;    // keep_going: replacements started so far
    bool member = true;  // keep_going: in a generation (a replacement: once one admits it)
    pid_t pid = -1;      // also its process group id
    bool running = false;
    int out_fd = -1, err_fd = -1;  // read ends of its stdout and stderr pipes
    LinePrefixer out, err;
    Rank(int r, int l) : rank(r), local(l), out(prefix(r)), err(prefix(r)) {}
    static std::string prefix(int r) { return "[rank " + std::to_string(r) + "] "; }
  };

  int run_attempt(int restart_count);  // one start of every rank, until all are reaped
  void spawn(Rank& r, const std::vector<std::string>& env);
  void pump(int timeout_ms);  // waits up to timeout_ms for output or a wake-up, forwards output
  // Reads fd until it would block, appending prefixed lines to sink; closes it at end of stream.
  void read_from(int& fd, LinePrefixer& lp, std::string& sink);
  void reap();
  void begin_stop(int sig, const std::string& why);
  void signal_all(int sig);
  void note(const std::string& line);
  // keep_going: the job's store, served on node 0, and a thread that watches its generations.
  void serve_store();
  void end_fenced();  // ends the local ranks a new generation left out
  // One node: ends the replacements still waiting to join once no member of the job runs (nobody
  // is left to admit them; on several nodes their own wait ends them).
  void end_unadmitted();
  // keep_going: a rank killed by a signal started again (same RANK) for the others to re-admit,
  // while no rank has completed and it has replacements left; false when it is not. (A rank that
  // exited by itself said why: it is not started again.)
  bool replace(Rank& r);
  bool any_running() const;
  bool any_pipe_open() const;

  LaunchOptions opts_;
  int out_fd_, err_fd_;
  int wake_r_ = -1, wake_w_ = -1;
  std::atomic<int> stop_requests_{0};
  std::atomic<int> stop_signal_{0};
  int stop_requests_seen_ = 0;
  std::vector<Rank> ranks_;
  int exit_code_ = 0;
  bool failed_ = false;    // a rank failed: exit_code_ is its code
  bool stopping_ = false;  // SIGTERM (or the forwarded signal) sent; SIGKILL at kill_at_
  bool killed_ = false;    // SIGKILL sent
  double kill_at_ = 0;
  std::unique_ptr<comm::TcpStoreServer> store_server_;
  std::unique_ptr<MembershipWatch> watch_;
  bool watch_failed_ = false;      // noted once
  bool unadmitted_ended_ = false;  // noted once
  bool completed_ = false;         // keep_going: a rank exited 0
  int lost_code_ = 0;              // keep_going: the first lost rank's code
  std::vector<std::string> env_;   // the ranks' environment, less the per-rank variables
  int cores_ = 1;
};

}  // namespace engine::launch
