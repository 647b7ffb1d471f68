// core/knobs.cpp: see knobs.h. Each accessor names its variable in full, so that grepping for a
// variable finds the one place that reads it.
#include "core/knobs.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/threads.h"

namespace engine::knobs {
namespace {

// The table's rows; each accessor below reads its row's variable by its full name.
constexpr Knob kAlgo{"ENGINE_ALGO", "auto|ring|rd|rh|tree", "auto"};
constexpr Knob kCudaKernels{"ENGINE_CUDA_KERNELS", "library|engine", "engine"};
constexpr Knob kCudaRing{"ENGINE_CUDA_RING", "auto|staged|ipc", "auto"};
constexpr Knob kRingProtocol{"ENGINE_RING_PROTOCOL", "auto|ll|simple|events", "auto"};
constexpr Knob kRingChannels{"ENGINE_RING_CHANNELS", "0 .. 32", "0"};
constexpr Knob kCudaGraph{"ENGINE_CUDA_GRAPH", "auto|on|off", "auto"};
constexpr Knob kDataOnDevice{"ENGINE_DATA_ON_DEVICE", "auto|on|off", "auto"};
constexpr Knob kThreads{"ENGINE_THREADS", "1 .. 1024", ""};
constexpr Knob kSyncGuard{"ENGINE_SYNC_GUARD", "0|1", "0"};
constexpr Knob kMaxCpuIsa{"ENGINE_MAX_CPU_ISA", "avx512_core_bf16|avx512_core|avx2", ""};
constexpr Knob kCommHostId{"ENGINE_COMM_HOST_ID", "any text", ""};
constexpr Knob kPowersgdStart{"ENGINE_POWERSGD_START", "0 .. 1000000000", "100"};
constexpr Knob kFlightRecorder{"ENGINE_FLIGHT_RECORDER", "0|1", "1"};
constexpr int kMaxRingChannels = 32;  // comm/backends/cuda_ipc/protocol/layout.h kMaxChannels

const char* set_or_null(const char* v) {
  return v && *v ? v : nullptr;
}

// v (k's variable) if it is one of k's |-separated values, k's default when unset, else an error.
std::string choice(const Knob& k, const char* v) {
  if (!set_or_null(v)) return k.fallback;
  const size_t n = std::strlen(v);
  for (const char* p = k.values;;) {
    const char* bar = std::strchr(p, '|');
    const size_t len = bar ? static_cast<size_t>(bar - p) : std::strlen(p);
    if (len == n && std::strncmp(p, v, n) == 0) return v;
    if (!bar) break;
    p = bar + 1;
  }
  ENGINE_FAIL(k.name, "=", v, ": expected ", k.values);
}

// v (k's variable) as an integer lo .. hi; fallback when unset, else an error.
int integer(const Knob& k, const char* v, long long lo, long long hi, int fallback) {
  if (!set_or_null(v)) return fallback;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v, &end, 10);
  ENGINE_CHECK(*end == 0 && errno != ERANGE && x >= lo && x <= hi, k.name, "=", v,
               ": expected an integer ", lo, " .. ", hi);
  return static_cast<int>(x);
}

}  // namespace

const std::vector<Knob>& all() {
  static const std::vector<Knob> kAll = {
      kAlgo,       kCudaKernels,   kCudaRing,      kRingProtocol, kRingChannels,
      kCudaGraph,  kDataOnDevice,  kThreads,       kSyncGuard,    kMaxCpuIsa,
      kCommHostId, kPowersgdStart, kFlightRecorder};
  return kAll;
}

void check_all() {
  (void)algo(), (void)cuda_kernels(), (void)cuda_ring(), (void)ring_protocol();
  (void)ring_channels(), (void)cuda_graph(), (void)data_on_device(), (void)threads();
  (void)sync_guard(), (void)max_cpu_isa(), (void)comm_host_id(), (void)powersgd_start();
  (void)flight_recorder();
}

bool given(const char* name) {
  return set_or_null(std::getenv(name)) != nullptr;
}

std::string algo() {
  return choice(kAlgo, std::getenv("ENGINE_ALGO"));
}
std::string cuda_kernels() {
  return choice(kCudaKernels, std::getenv("ENGINE_CUDA_KERNELS"));
}
std::string cuda_ring() {
  return choice(kCudaRing, std::getenv("ENGINE_CUDA_RING"));
}
std::string ring_protocol() {
  return choice(kRingProtocol, std::getenv("ENGINE_RING_PROTOCOL"));
}
int ring_channels() {
  return integer(kRingChannels, std::getenv("ENGINE_RING_CHANNELS"), 0, kMaxRingChannels, 0);
}
std::string cuda_graph() {
  return choice(kCudaGraph, std::getenv("ENGINE_CUDA_GRAPH"));
}
std::string data_on_device() {
  return choice(kDataOnDevice, std::getenv("ENGINE_DATA_ON_DEVICE"));
}
int threads() {
  return integer(kThreads, std::getenv("ENGINE_THREADS"), 1, kMaxThreads, 0);
}
bool sync_guard() {
  return choice(kSyncGuard, std::getenv("ENGINE_SYNC_GUARD")) == "1";
}
std::string max_cpu_isa() {
  return choice(kMaxCpuIsa, std::getenv("ENGINE_MAX_CPU_ISA"));
}
bool flight_recorder() {
  return choice(kFlightRecorder, std::getenv("ENGINE_FLIGHT_RECORDER")) == "1";
}
int powersgd_start() {
  return integer(kPowersgdStart, std::getenv("ENGINE_POWERSGD_START"), 0, 1000000000, 100);
}
std::string comm_host_id() {
  const char* v = set_or_null(std::getenv("ENGINE_COMM_HOST_ID"));
  return v ? v : "";
}

}  // namespace engine::knobs
