// core/device.h: where a tensor lives: the CPU or one CUDA GPU (cuda:N).
#pragma once
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
// Throws engine::Error "<context>: <problem>" (or just the problem) unless cuda:index answers.
void check_cuda_device(int index, const std::string& context = "");

}  // namespace engine
