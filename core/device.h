// core/device.h: where a tensor lives: the CPU or one CUDA GPU (cuda:N).
#pragma once
#include <cstdint>
#include <string>

namespace engine {

enum class DeviceKind : uint8_t { CPU, CUDA };

struct Device {
  DeviceKind kind = DeviceKind::CPU;
  int index = 0;

  static Device cpu() { return {DeviceKind::CPU, 0}; }
  static Device cuda(int i = 0) { return {DeviceKind::CUDA, i}; }
  bool is_cpu() const { return kind == DeviceKind::CPU; }
  bool is_cuda() const { return kind == DeviceKind::CUDA; }
  bool operator==(const Device&) const = default;

  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
  // "cpu", "cuda" (= cuda:0) or "cuda:N"; throws engine::Error otherwise.
  static Device parse(const std::string& s);
};

// Number of CUDA devices that answer; 0 in a CPU-only build or when no driver/GPU is present.
int cuda_device_count();
// Why no CUDA device answers ("no CUDA device: ..."), or "" when one does.
std::string cuda_unavailable_reason();
// "" when cuda:index answers in this process, else why not: "cuda:N is not a device of this
// process (K CUDA devices)", or with none at all "no CUDA device: <reason>; cuda:N is not ...".
std::string cuda_device_problem(int index);
// The "no CUDA device: ..." line for a failed device discovery: runtime_error is the runtime's
// text, insufficient_driver whether it said the driver is too old, driver_present whether the
// driver library (libcuda.so.1) loads at all, driver/runtime_version CUDA versions as 13000 (0:
// unknown). Without a driver the runtime also says "driver version is insufficient": it is told
// apart here, so that a machine with no NVIDIA driver is not sent to upgrade one.
std::string cuda_absence_reason(const std::string& runtime_error, bool insufficient_driver,
                                bool driver_present, int driver_version, int runtime_version);
// Throws engine::Error "<context>: <problem>" (or just the problem) unless cuda:index answers.
void check_cuda_device(int index, const std::string& context = "");

}  // namespace engine
