// kernels/cpu/peak.cpp: FMA and vdpbf16ps throughput loops. Each thread runs independent
// accumulator chains (ten FMA, sixteen vdpbf16ps: more than latency x throughput on Zen 4 and
// Zen 5), so the loop is bound by the units alone; the results are summed into a sink the
// compiler cannot drop.
#include "kernels/cpu/peak.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_features.h"

namespace engine::kernels::cpu {
namespace {

std::atomic<float> g_sink{0.f};

// Keeps a loop's result alive (two lanes are enough: every lane ran the same chain).
__attribute__((target("avx512f"))) void sink(__m512 v) {
  alignas(64) float f[16];
  _mm512_store_ps(f, v);
  g_sink.store(f[0] + f[15], std::memory_order_relaxed);
}

constexpr int64_t kIters = 1 << 16;  // per call: 10 chains x 65536 = 655k instructions

__attribute__((target("avx512f"))) double fma_loop_avx512() {
  __m512 a = _mm512_set1_ps(0.9999f), b = _mm512_set1_ps(1e-4f);
  // Distinct starting values: equal chains would be merged into one by the compiler.
  __m512 c0 = _mm512_set1_ps(0.f), c1 = _mm512_set1_ps(.1f), c2 = _mm512_set1_ps(.2f),
         c3 = _mm512_set1_ps(.3f), c4 = _mm512_set1_ps(.4f), c5 = _mm512_set1_ps(.5f),
         c6 = _mm512_set1_ps(.6f), c7 = _mm512_set1_ps(.7f), c8 = _mm512_set1_ps(.8f),
         c9 = _mm512_set1_ps(.9f);
  for (int64_t i = 0; i < kIters; ++i) {
    c0 = _mm512_fmadd_ps(c0, a, b), c1 = _mm512_fmadd_ps(c1, a, b);
    c2 = _mm512_fmadd_ps(c2, a, b), c3 = _mm512_fmadd_ps(c3, a, b);
    c4 = _mm512_fmadd_ps(c4, a, b), c5 = _mm512_fmadd_ps(c5, a, b);
    c6 = _mm512_fmadd_ps(c6, a, b), c7 = _mm512_fmadd_ps(c7, a, b);
    c8 = _mm512_fmadd_ps(c8, a, b), c9 = _mm512_fmadd_ps(c9, a, b);
  }
  __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                           _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7)));
  sink(_mm512_add_ps(s, _mm512_add_ps(c8, c9)));
  return 10.0 * kIters * 16 * 2;
}

__attribute__((target("avx2,fma"))) double fma_loop_avx2() {
  __m256 a = _mm256_set1_ps(0.9999f), b = _mm256_set1_ps(1e-4f);
  // Distinct starting values: equal chains would be merged into one by the compiler.
  __m256 c0 = _mm256_set1_ps(0.f), c1 = _mm256_set1_ps(.1f), c2 = _mm256_set1_ps(.2f),
         c3 = _mm256_set1_ps(.3f), c4 = _mm256_set1_ps(.4f), c5 = _mm256_set1_ps(.5f),
         c6 = _mm256_set1_ps(.6f), c7 = _mm256_set1_ps(.7f), c8 = _mm256_set1_ps(.8f),
         c9 = _mm256_set1_ps(.9f);
  for (int64_t i = 0; i < kIters; ++i) {
    c0 = _mm256_fmadd_ps(c0, a, b), c1 = _mm256_fmadd_ps(c1, a, b);
    c2 = _mm256_fmadd_ps(c2, a, b), c3 = _mm256_fmadd_ps(c3, a, b);
    c4 = _mm256_fmadd_ps(c4, a, b), c5 = _mm256_fmadd_ps(c5, a, b);
    c6 = _mm256_fmadd_ps(c6, a, b), c7 = _mm256_fmadd_ps(c7, a, b);
    c8 = _mm256_fmadd_ps(c8, a, b), c9 = _mm256_fmadd_ps(c9, a, b);
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                           _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)));
  s = _mm256_add_ps(s, _mm256_add_ps(c8, c9));
  alignas(32) float v[8];
  _mm256_store_ps(v, s);
  g_sink.store(v[0] + v[7], std::memory_order_relaxed);
  return 10.0 * kIters * 8 * 2;
}

// vdpbf16ps: 16 lanes, each adds two bf16 products: 64 FLOP per instruction. Sixteen chains:
// its latency is longer than the FMA's, and ten chains measured 20% under the throughput on Zen 5
// (360 against 440 GFLOP/s on one thread; 12 chains 400, 16 and 20 chains 440).
constexpr int kDotChains = 16;
__attribute__((target("avx512f,avx512bf16"))) double dot_loop_bf16() {
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3F80);  // 1.0
  const __m512bh b = (__m512bh)_mm512_set1_epi16(0x3800);  // 2^-15
  // Distinct starting values: equal chains would be merged into one by the compiler.
  __m512 c[kDotChains];
  for (int j = 0; j < kDotChains; ++j) c[j] = _mm512_set1_ps(0.1f * static_cast<float>(j));
  for (int64_t i = 0; i < kIters; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < kDotChains; ++j) c[j] = _mm512_dpbf16_ps(c[j], a, b);
  }
  __m512 s = c[0];
  for (int j = 1; j < kDotChains; ++j) s = _mm512_add_ps(s, c[j]);
  sink(s);
  return double(kDotChains) * kIters * 16 * 4;
}

// GFLOP/s of `loop` on `threads` threads at once: best of runs of about `seconds` each.
double rate(double (*loop)(), int threads, double seconds) {
  const double flop_per_call = loop();
  double best = 0;
  for (int run = 0; run < 11; ++run) {  // run 0 warms up: wakes the cores, raises their clocks
    int64_t calls = 0;
    auto t0 = std::chrono::steady_clock::now();
    double elapsed = 0;
    while (elapsed < seconds) {  // batches of 8 calls on every thread
      if (threads == 1)
        for (int i = 0; i < 8; ++i) loop();
      else
        parallel_run([&](int t, int) {
          if (t < threads)
            for (int i = 0; i < 8; ++i) loop();
        });
      calls += 8;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    if (run > 0) best = std::max(best, flop_per_call * calls * threads / elapsed * 1e-9);
  }
  return best;
}

}  // namespace

Peak measure_peak(int threads, double seconds) {
  ENGINE_CHECK(threads >= 1 && threads <= num_threads(), "measure_peak: ", threads,
               " threads asked, the pool has ", num_threads());
  Peak p;
  p.threads = threads;
  const bool avx512 = has_avx512f();
  p.isa = avx512 ? "avx512" : "avx2";
  p.fp32_gflops = rate(avx512 ? fma_loop_avx512 : fma_loop_avx2, threads, seconds);
  if (has_avx512_bf16()) p.bf16_gflops = rate(dot_loop_bf16, threads, seconds);
  return p;
}

}  // namespace engine::kernels::cpu
