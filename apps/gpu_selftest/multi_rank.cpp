// apps/gpu_selftest/multi_rank.cpp: two-rank collective checks (see multi_rank.h).
#include "apps/gpu_selftest/multi_rank.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

#include "comm/backends/cuda_ipc/cuda_ipc_ring.h"
#include "comm/backends/cuda_ipc/ipc_peers.h"
#include "comm/backends/nccl/nccl_group.h"
#include "comm/rendezvous/file_store.h"
#include "comm/rendezvous/rendezvous.h"
#include "core/cuda_backend.h"
#include "core/error.h"

namespace engine::selftest {
namespace {

constexpr int kTimeoutS = 60;
const char* const kBackends[] = {"ring-staged", "ring-ipc", "nccl"};

float value(int rank, int64_t i) {
  return static_cast<float>((i % 4099) * 4 + rank);  // exact in float32, unique per rank
}

// Runs the children of one backend; returns their exit codes (128 + signal when killed at the
// deadline) and what they printed to stderr is left on our stderr.
std::vector<int> run_children(const std::string& self, const std::string& backend, int world,
                              const std::string& dir) {
  std::vector<pid_t> pids;
  std::fflush(stdout);
  std::fflush(stderr);
  for (int r = 0; r < world; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      const std::string rank = std::to_string(r), w = std::to_string(world);
      execl(self.c_str(), self.c_str(), "--child", backend.c_str(), rank.c_str(), w.c_str(),
            dir.c_str(), static_cast<char*>(nullptr));
      std::perror("gpu_selftest: exec");
      _exit(127);
    }
    ENGINE_CHECK(pid > 0, "gpu_selftest: fork failed");
    pids.push_back(pid);
  }
  std::vector<int> codes(world, -1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kTimeoutS + 10);
  for (int left = world; left > 0;) {
    for (int r = 0; r < world; ++r) {
      if (codes[r] != -1) continue;
      int st = 0;
      if (waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        codes[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        --left;
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < world; ++r)
        if (codes[r] == -1) {
          kill(pids[r], SIGKILL);
          int st = 0;
          waitpid(pids[r], &st, 0);
          codes[r] = 128 + SIGKILL;
          --left;
        }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return codes;
}

}  // namespace

std::vector<CheckResult> run_multi_rank_checks(Device, const std::string& self) {
  std::vector<CheckResult> out;
  constexpr int kWorld = 2;
  for (const char* backend : kBackends) {
    CheckResult r;
    r.group = "comm";
    r.name = std::string(backend) + " all_reduce, 2 ranks";
    std::error_code ec;
    const auto dir = std::filesystem::temp_directory_path() /
                     ("gpu_selftest_" + std::to_string(getpid()) + "_" + backend);
    std::filesystem::remove_all(dir, ec);
    std::filesystem::create_directories(dir, ec);
    try {
      r.outcome = outcome_of(run_children(self, backend, kWorld, dir.string()), &r.detail);
    } catch (const std::exception& e) {
      r.detail = e.what();
    }
    std::filesystem::remove_all(dir, ec);
    out.push_back(r);
  }
  return out;
}

int run_child(const std::string& backend, int rank, int world, const std::string& dir) {
  try {
    const int devices = cuda_device_count();
    ENGINE_CHECK(devices > 0, cuda_unavailable_reason());
    const Device dev = Device::cuda(rank % devices);
    cuda::set_home_device(dev.index);
    auto store = std::make_shared<comm::FileStore>(dir, comm::Millis(kTimeoutS * 1000));
    comm::ConnectOptions o;
    o.timeout = comm::Millis(kTimeoutS * 1000);
    std::unique_ptr<comm::Communicator> c = comm::connect_communicator(store, rank, world, o);
    if (backend == "nccl") {
      if (devices < world) {  // NCCL refuses two ranks on one GPU
        std::fprintf(stderr, "[rank %d] nccl: needs %d GPUs, found %d\n", rank, world, devices);
        return kSkipCode;
      }
      comm::NcclOptions no;
      no.timeout = o.timeout;
      c->attach_nccl(std::make_unique<comm::NcclGroup>(store, rank, world, dev.index, no));
    } else if (backend == "ring-ipc") {
      const std::string why = comm::ipc_ring_problem(*c, dev.index);
      if (!why.empty()) {
        std::fprintf(stderr, "[rank %d] ring-ipc: %s\n", rank, why.c_str());
        return kSkipCode;
      }
      comm::IpcRingOptions io;
      io.timeout = o.timeout;
      c->attach_ipc_ring(std::make_unique<comm::CudaIpcRing>(store, rank, world, dev.index, io));
    } else {
      ENGINE_CHECK(backend == "ring-staged", "unknown backend '", backend, "'");
    }
    for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{(1 << 20) + 3}}) {
      std::vector<float> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) v[i] = value(rank, i);
      for (comm::ReduceOp op : {comm::ReduceOp::Sum, comm::ReduceOp::Avg}) {
        Tensor t = Tensor::from_vector(v, {n}, dev);
        c->all_reduce(t, op);
        const std::vector<float> got = t.to_vector();
        for (int64_t i = 0; i < n; ++i) {
          float want = 0;
          for (int q = 0; q < world; ++q) want += value(q, i);
          if (op == comm::ReduceOp::Avg) want /= static_cast<float>(world);
          ENGINE_CHECK(std::fabs(got[i] - want) <= 1e-6f * std::fabs(want), backend,
                       " all_reduce of ", n, " floats (", op == comm::ReduceOp::Sum ? "SUM" : "AVG",
                       "): element ", i, " is ", got[i], ", expected ", want);
        }
      }
    }
    c->barrier();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] %s: %s\n", rank, backend.c_str(), e.what());
    return 1;
  }
}

}  // namespace engine::selftest
