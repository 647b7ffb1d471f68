// apps/allreduce_bench/cuda_env.cpp: the probe (fork, ask, report through a pipe) and the CUDA
// runtime calls, the latter only in a build with CUDA.
#include "apps/allreduce_bench/cuda_env.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/device.h"
#include "core/error.h"

#ifdef ENGINE_WITH_CUDA
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "core/cuda/check.cuh"
#endif

namespace engine::allreduce_bench {

CudaProbe probe_cuda_devices() {
  int fds[2];
  ENGINE_CHECK(pipe(fds) == 0, "CUDA probe: pipe: ", std::strerror(errno));
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(fds[0]);
    close(fds[1]);
    ENGINE_FAIL("CUDA probe: fork: ", std::strerror(err));
  }
  if (pid == 0) {  // the child: the only process of this program that has touched CUDA
    close(fds[0]);
    const std::string msg =
        std::to_string(engine::cuda_device_count()) + "\n" + engine::cuda_unavailable_reason();
    size_t off = 0;
    while (off < msg.size()) {
      const ssize_t n = write(fds[1], msg.data() + off, msg.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[512];
  for (;;) {
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n > 0) {
      msg.append(buf, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  close(fds[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  CudaProbe p;
  const size_t nl = msg.find('\n');
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && nl != std::string::npos) {
    p.count = std::atoi(msg.substr(0, nl).c_str());
    p.reason = msg.substr(nl + 1);
  } else {
    p.reason = "no CUDA device: the process that asked the CUDA driver " +
               std::string(WIFSIGNALED(st) ? "was killed by signal " + std::to_string(WTERMSIG(st))
                                           : "failed");
  }
  if (p.count <= 0) {
    p.count = 0;
    if (p.reason.empty()) p.reason = "no CUDA device: the driver reports 0 devices";
  }
  return p;
}

#ifdef ENGINE_WITH_CUDA

void device_synchronize(int device) {
  cuda::DeviceGuard guard(device);
  CUDA_CHECK(cudaDeviceSynchronize());
}

std::string device_name(int device) {
  cudaDeviceProp p{};
  CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  return p.name;
}

std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "unknown";
  // NCCL_VERSION(X, Y, Z) = X * 10000 + Y * 100 + Z since 2.9.
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
         std::to_string(v % 100);
}

#else  // no CUDA in this build

void device_synchronize(int) {
  ENGINE_FAIL("allreduce_bench: CUDA is not built in (configure with -DENGINE_CUDA=ON)");
}

std::string device_name(int) {
  ENGINE_FAIL("allreduce_bench: CUDA is not built in (configure with -DENGINE_CUDA=ON)");
}

std::string nccl_version() {
  return "none (no CUDA in this build)";
}

#endif

}  // namespace engine::allreduce_bench
