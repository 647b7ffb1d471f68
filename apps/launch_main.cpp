// apps/launch_main.cpp: `launch`, torchrun's job for our programs: starts N local ranks with
// torchrun's environment variables, prefixes their output, stops the job when a rank fails.
// This file parses flags and installs signal handlers; apps/launch/ does the work.
#include <signal.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "apps/launch/supervisor.h"

namespace {

const char kUsage[] =
    "usage: launch --nproc-per-node N [--nnodes M --node-rank K --master-addr A --master-port P]\n"
    "              [--grace-period S] [--] PROGRAM [ARGS...]\n"
    "\n"
    "Starts N copies of PROGRAM on this node, ranks node_rank*N .. node_rank*N+N-1 of M*N,\n"
    "each with torchrun's variables set: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,\n"
    "GROUP_RANK, NODE_RANK, MASTER_ADDR, MASTER_PORT; and ENGINE_THREADS = max(1, cores / N)\n"
    "unless already set. Each line a rank prints is prefixed with \"[rank R] \".\n"
    "When a rank fails, the others get SIGTERM, then SIGKILL after the grace period, and launch\n"
    "exits with the failed rank's code (128 + signal if it was killed). SIGINT, SIGTERM and\n"
    "SIGHUP are forwarded to the ranks; a second one kills them.\n"
    "\n"
    "  --nproc-per-node N   ranks to start on this node (required, >= 1)\n"
    "  --nnodes M           nodes in the job (default 1)\n"
    "  --node-rank K        this node's index, 0 .. M-1 (default 0)\n"
    "  --master-addr A      address of rank 0's host (default 127.0.0.1)\n"
    "  --master-port P      port of rank 0's store (default 29500)\n"
    "  --grace-period S     seconds between SIGTERM and SIGKILL when stopping (default 5)\n"
    "  --help               this text\n"
    "\n"
    "example: launch --nproc-per-node 2 -- ./build/apps/train --model simplecnn --epochs 1\n";

struct UsageError {
  std::string what;
};

template <class T>
T parse_number(std::string_view flag, std::string_view text) {
  T v{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    throw UsageError{"--" + std::string(flag) + " wants a number, got '" + std::string(text) + "'"};
  return v;
}

engine::launch::LaunchOptions parse_args(int argc, char** argv) {
  engine::launch::LaunchOptions o;
  bool have_nproc = false;
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.rfind("-", 0) != 0) break;  // the program starts here
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (arg.rfind("--", 0) != 0) throw UsageError{"unknown flag '" + arg + "'"};
    std::string name = arg.substr(2), value;
    for (char& c : name)
      if (c == '_') c = '-';  // torchrun spells them both ways
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    } else if (name == "nproc-per-node" || name == "nnodes" || name == "node-rank" ||
               name == "master-addr" || name == "master-port" || name == "grace-period") {
      if (i + 1 >= argc) throw UsageError{"--" + name + " needs a value"};
      value = argv[++i];
    }
    if (name == "nproc-per-node") {
      o.job.nproc_per_node = parse_number<int>(name, value);
      have_nproc = true;
    } else if (name == "nnodes") {
      o.job.nnodes = parse_number<int>(name, value);
    } else if (name == "node-rank") {
      o.job.node_rank = parse_number<int>(name, value);
    } else if (name == "master-addr") {
      o.job.master_addr = value;
    } else if (name == "master-port") {
      o.job.master_port = parse_number<int>(name, value);
    } else if (name == "grace-period") {
      o.grace_s = parse_number<double>(name, value);
    } else {
      throw UsageError{"unknown flag '" + arg + "'"};
    }
  }
  for (; i < argc; ++i) o.command.emplace_back(argv[i]);

  if (!have_nproc) throw UsageError{"--nproc-per-node is required"};
  if (o.job.nproc_per_node < 1 || o.job.nproc_per_node > 1024)
    throw UsageError{"--nproc-per-node must be 1 .. 1024"};
  if (o.job.nnodes < 1) throw UsageError{"--nnodes must be at least 1"};
  if (o.job.node_rank < 0 || o.job.node_rank >= o.job.nnodes)
    throw UsageError{"--node-rank must be 0 .. " + std::to_string(o.job.nnodes - 1)};
  if (o.job.master_addr.empty()) throw UsageError{"--master-addr is empty"};
  if (o.job.master_port < 1 || o.job.master_port > 65535)
    throw UsageError{"--master-port must be 1 .. 65535"};
  if (!(o.grace_s >= 0)) throw UsageError{"--grace-period must be >= 0"};
  if (o.command.empty()) throw UsageError{"no program to run (put it after --)"};
  return o;
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

}  // namespace

int main(int argc, char** argv) {
  engine::launch::LaunchOptions opts;
  try {
    opts = parse_args(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "launch: %s\nRun 'launch --help' for usage.\n", e.what.c_str());
    return 2;
  }
  try {
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
    return supervisor.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "launch: %s\n", e.what());
    return 1;
  }
}
