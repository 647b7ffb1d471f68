// kernels/cpu/peak.h: the machine's arithmetic limit, measured: the rate at which this CPU retires
// fused multiply-adds when nothing else limits it (ten independent FMA chains per thread on zmm
// registers, ymm where the CPU has no AVX-512), and the bf16 dot-product rate (vdpbf16ps) where it
// has AVX512_BF16. Every kernel's speed is reported as a share of these (bench_kernels, train
// train's profile, scripts/bench_vs_torch.sh). GFLOP/s count a multiply-add as 2 FLOP per lane.
#pragma once

namespace engine::kernels::cpu {

struct Peak {
  int threads = 0;         // how many threads ran the loop at once
  double fp32_gflops = 0;  // FMA (vfmadd*ps) throughput, all threads together
  double bf16_gflops = 0;  // vdpbf16ps throughput (0 without AVX512_BF16)
  const char* isa = "";    // "avx512" or "avx2": the registers the FMA loop used
};

// Runs the loops on `threads` threads of the engine's pool (threads <= num_threads(); 1 runs on
// the calling thread), best of a few runs of about `seconds` each.
Peak measure_peak(int threads, double seconds = 0.05);

}  // namespace engine::kernels::cpu
