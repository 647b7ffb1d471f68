// apps/launch_main.cpp: `launch`, torchrun's job for our programs: starts N local ranks with
// torchrun's environment variables, prefixes their output, stops the job when a rank fails.
// This file parses flags and installs signal handlers; apps/launch/ does the work.
#include <signal.h>

#include <cstdio>
#include <exception>
#include <string>

#include "apps/launch/supervisor.h"
#include "apps/program.h"

namespace {

const char kUsage[] =
    "usage: launch --nproc-per-node N [--nnodes M --node-rank K --master-addr A --master-port P]\n"
    "              [--stop-grace S] [--max-restarts R] [--on-rank-loss stop|continue]\n"
    "              [--] PROGRAM [ARGS...]\n"
    "\n"
    "Starts N copies of PROGRAM on this node, ranks node_rank*N .. node_rank*N+N-1 of M*N,\n"
    "each with torchrun's variables set: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,\n"
    "GROUP_RANK, NODE_RANK, MASTER_ADDR, MASTER_PORT; and ENGINE_THREADS = max(1, cores / N)\n"
    "unless already set. Each line a rank prints is prefixed with \"[rank R] \".\n"
    "When a rank fails, the others get SIGTERM, then SIGKILL after the grace period, and launch\n"
    "exits with the failed rank's code (128 + signal if it was killed). SIGINT, SIGTERM and\n"
    "SIGHUP are forwarded to the ranks (train --flight-recorder writes its dumps meanwhile),\n"
    "what is left after the grace period is killed, and launch exits 128 + the signal's number;\n"
    "a second signal kills them at once. With --max-restarts R, a\n"
    "failed job (not one stopped by a signal to launch) is started again, every rank, up to R\n"
    "times, as torchrun's --max-restarts; each start sees TORCHELASTIC_RESTART_COUNT\n"
    "(train --checkpoint F --resume auto then goes on from its last checkpoint).\n"
    "With --on-rank-loss continue, launch serves the job's store itself (ranks get\n"
    "ENGINE_AGENT_STORE=1), a failed rank does not stop the others (train --on-rank-loss\n"
    "continue regroups them), a rank they left out is ended, and launch exits 0 when a\n"
    "rank completes.\n"
    "Flags may be spelt with '_' (--nproc_per_node) as torchrun's are. Exit status 2 for bad\n"
    "flags, 1 when launch itself fails.\n"
    "\n"
    "example: launch --nproc-per-node 2 -- ./build/apps/train --model simplecnn --epochs 1";

// Parses launch's flags; the program and its arguments start at the first argument that is not
// a flag, or after "--". Returns false when --help was printed.
bool parse_args(int argc, char** argv, engine::launch::LaunchOptions* o) {
  engine::apps::Flags f(kUsage);
  f.stop_at_first_positional();
  f.accept_underscores();
  int64_t nproc = 0, nnodes = o->job.nnodes, node_rank = o->job.node_rank,
          port = o->job.master_port;
  f.add("nproc-per-node", &nproc, "ranks to start on this node (>= 1)");
  f.add("nnodes", &nnodes, "nodes in the job");
  f.add("node-rank", &node_rank, "this node's index, 0 .. M-1");
  f.add("master-addr", &o->job.master_addr, "address of rank 0's host");
  f.add("master-port", &port, "port of rank 0's store");
  f.add("stop-grace", &o->grace_s,
        "seconds between the stop signal and SIGKILL when stopping the ranks (default 10)");
  f.add("grace-period", &o->grace_s, "the same as --stop-grace (its first name)");
  int64_t restarts = 0;
  f.add("max-restarts", &restarts, "start every rank again after a failure, up to R times");
  std::string on_loss = "stop";
  f.add_choice("on-rank-loss", &on_loss, {"stop", "continue"},
               "stop: a failed rank stops the others; continue: launch serves the job's store "
               "and the others go on (train --on-rank-loss continue)");
  f.require("nproc-per-node");
  if (!f.parse(argc, argv)) return false;
  ENGINE_USAGE_CHECK(nproc >= 1 && nproc <= 1024, "--nproc-per-node must be 1 .. 1024");
  ENGINE_USAGE_CHECK(nnodes >= 1 && nnodes <= 1 << 20, "--nnodes must be at least 1");
  ENGINE_USAGE_CHECK(node_rank >= 0 && node_rank < nnodes, "--node-rank must be 0 .. ", nnodes - 1);
  ENGINE_USAGE_CHECK(!o->job.master_addr.empty(), "--master-addr is empty");
  ENGINE_USAGE_CHECK(port >= 1 && port <= 65535, "--master-port must be 1 .. 65535");
  ENGINE_USAGE_CHECK(o->grace_s >= 0, "--stop-grace must be >= 0");
  ENGINE_USAGE_CHECK(restarts >= 0 && restarts <= 1000000, "--max-restarts must be 0 .. 1000000");
  o->max_restarts = static_cast<int>(restarts);
  o->keep_going = on_loss == "continue";
  ENGINE_USAGE_CHECK(!o->keep_going || restarts == 0, "--on-rank-loss continue keeps the ranks ",
                     "running: --max-restarts does not apply");
  ENGINE_USAGE_CHECK(!f.rest().empty(), "no program to run (put it after --)");
  o->job.nproc_per_node = static_cast<int>(nproc);
  o->job.nnodes = static_cast<int>(nnodes);
  o->job.node_rank = static_cast<int>(node_rank);
  o->job.master_port = static_cast<int>(port);
  o->command = f.rest();
  return true;
}

engine::launch::Supervisor* g_supervisor = nullptr;

extern "C" void on_stop_signal(int sig) {
  if (g_supervisor != nullptr) g_supervisor->request_stop(sig);
}
extern "C" void on_child(int) {
  if (g_supervisor != nullptr) g_supervisor->wake();
}

void install(int sig, void (*handler)(int)) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | (sig == SIGCHLD ? SA_NOCLDSTOP : 0);
  sigaction(sig, &sa, nullptr);
}

int run(int argc, char** argv) {
  engine::launch::LaunchOptions opts;
  if (!parse_args(argc, argv, &opts)) return 0;
  engine::launch::Supervisor supervisor(std::move(opts));
  struct Handlers {  // installed for the supervisor's lifetime only
    explicit Handlers(engine::launch::Supervisor* s) {
      g_supervisor = s;
      signal(SIGPIPE, SIG_IGN);  // a closed stdout must not kill launch before it reaps
      install(SIGCHLD, on_child);
      for (int sig : {SIGINT, SIGTERM, SIGHUP}) install(sig, on_stop_signal);
    }
    ~Handlers() {
      for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) signal(sig, SIG_DFL);
      g_supervisor = nullptr;
    }
  } handlers(&supervisor);
  return supervisor.run();  // the failed rank's code, or 0
}

}  // namespace

int main(int argc, char** argv) {
  return engine::apps::run_program("launch", argc, argv, run);
}
