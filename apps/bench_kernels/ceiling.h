// apps/bench_kernels/ceiling.h: owns the machine ceilings bench_kernels measures at start and
// reports every case against: the FMA peak (kernels/cpu/peak.h: the physical FP32 limit) and
// OpenBLAS SGEMM for compute, STREAM-style copy and triad for memory.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/peak.h"

namespace engine::bench {

struct Ceilings {
  int threads = 1;           // engine::num_threads() when measured
  kernels::cpu::Peak peak;   // FMA and vdpbf16ps throughput on all threads
  kernels::cpu::Peak peak1;  // the same on one thread
  double sgemm_gflops = 0;   // best square SGEMM over the sizes tried
  int sgemm_n = 0;           // the size that gave it
  // STREAM's byte counts (copy: 2 x size, triad: 3 x size) over 64 MiB arrays, best of runs.
  double copy_gbs = 0, triad_gbs = 0;    // on num_threads() threads
  double copy1_gbs = 0, triad1_gbs = 0;  // on one thread (the ring's reduce step runs on one)
  double bandwidth() const { return copy_gbs > triad_gbs ? copy_gbs : triad_gbs; }
  double bandwidth1() const { return copy1_gbs > triad1_gbs ? copy1_gbs : triad1_gbs; }
};

Ceilings measure_ceilings();
// Only the FMA and bf16 dot-product peaks (bench_kernels --peak).
Ceilings measure_peaks();

// (key, human-readable value) pairs, reported before any case.
std::vector<std::pair<std::string, std::string>> describe(const Ceilings& c);
// The peaks alone, the first pairs describe() gives.
std::vector<std::pair<std::string, std::string>> describe_peaks(const Ceilings& c);

}  // namespace engine::bench
