// apps/bench_kernels/ceiling.cpp: SGEMM at n = 512, 1024, 2048, then copy (memcpy) and triad
// (a = b + 3c) over 64 MiB arrays, split across the pool's threads. Each is the best of several
// runs after a warm-up: on a shared 2-core machine the best run is the one nobody interrupted.
#include "apps/bench_kernels/ceiling.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <utility>

#include "core/thread_pool.h"
#include "kernels/testing/check.h"

namespace engine::bench {
namespace {

using kernels::testing::Buffer;
using kernels::testing::uniform;

double seconds_of(const std::function<void()>& fn) {
  auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Best of `reps` timed runs after one untimed run.
double best_seconds(int reps, const std::function<void()>& fn) {
  fn();
  double best = 1e30;
  for (int i = 0; i < reps; ++i) best = std::min(best, seconds_of(fn));
  return best;
}

// One large SGEMM with every pool thread busy: OpenBLAS runs single-threaded inside the engine
// (see core/thread_pool.h), so the rows of C are split over the pool, as the kernels do.
double sgemm_gflops(int n, int reps) {
  Buffer<float> a = uniform(int64_t(n) * n, 1), b = uniform(int64_t(n) * n, 2), c(int64_t(n) * n);
  double s = best_seconds(reps, [&] {
    parallel_for(n, 64, [&](int64_t r0, int64_t r1) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(r1 - r0), n, n, 1.f,
                  a + r0 * n, n, b, n, 0.f, c + r0 * n, n);
    });
  });
  return 2.0 * n * n * n / s * 1e-9;
}

// fn(begin, end) over [0, count) on the pool, or inline on this thread.
void split(int64_t count, bool pooled, const std::function<void(int64_t, int64_t)>& fn) {
  if (pooled)
    parallel_for(count, 1 << 16, fn);
  else
    fn(0, count);
}

}  // namespace

Ceilings measure_peaks() {
  Ceilings c;
  c.threads = num_threads();
  c.peak = kernels::cpu::measure_peak(c.threads, 0.1);
  c.peak1 = kernels::cpu::measure_peak(1, 0.1);
  return c;
}

Ceilings measure_ceilings() {
  Ceilings c = measure_peaks();
  for (auto [n, reps] : {std::pair{512, 20}, std::pair{1024, 8}, std::pair{2048, 3}}) {
    double g = sgemm_gflops(n, reps);
    if (g > c.sgemm_gflops) {
      c.sgemm_gflops = g;
      c.sgemm_n = n;
    }
  }
  const int64_t count = (int64_t(64) << 20) / 4;  // 64 MiB of floats per array
  Buffer<float> a = uniform(count, 3), b = uniform(count, 4), d = uniform(count, 5);
  for (bool pooled : {true, false}) {
    double copy = best_seconds(15, [&] {
      split(count, pooled, [&](int64_t s, int64_t e) { std::memcpy(a + s, b + s, 4 * (e - s)); });
    });
    double triad = best_seconds(15, [&] {
      split(count, pooled, [&](int64_t s, int64_t e) {
        float *x = a, *y = b, *z = d;
        for (int64_t i = s; i < e; ++i) x[i] = y[i] + 3.f * z[i];
      });
    });
    (pooled ? c.copy_gbs : c.copy1_gbs) = 2.0 * 4 * count / copy * 1e-9;
    (pooled ? c.triad_gbs : c.triad1_gbs) = 3.0 * 4 * count / triad * 1e-9;
  }
  return c;
}

std::vector<std::pair<std::string, std::string>> describe_peaks(const Ceilings& c) {
  auto line = [](const kernels::cpu::Peak& p) {
    char b[200];
    std::snprintf(
        b, sizeof b, "%.1f GFLOP/s fp32 FMA (%s), %s on %d thread(s)", p.fp32_gflops, p.isa,
        p.bf16_gflops > 0
            ? ("bf16 dot " + std::to_string(int(p.bf16_gflops + 0.5)) + " GFLOP/s (vdpbf16ps)")
                  .c_str()
            : "no AVX512_BF16",
        p.threads);
    return std::string(b);
  };
  return {{"peak", line(c.peak)}, {"peak_1thread", line(c.peak1)}};
}

std::vector<std::pair<std::string, std::string>> describe(const Ceilings& c) {
  auto out = describe_peaks(c);
  char l[3][200];
  std::snprintf(l[0], sizeof l[0],
                "OpenBLAS sgemm n=%d, rows split over %d thread(s): %.1f GFLOP/s", c.sgemm_n,
                c.threads, c.sgemm_gflops);
  std::snprintf(l[1], sizeof l[1],
                "64 MiB arrays on %d thread(s): copy %.1f GB/s, triad %.1f GB/s (STREAM counts)",
                c.threads, c.copy_gbs, c.triad_gbs);
  std::snprintf(l[2], sizeof l[2], "64 MiB arrays on one thread: copy %.1f GB/s, triad %.1f GB/s",
                c.copy1_gbs, c.triad1_gbs);
  out.insert(
      out.end(),
      {{"ceiling_compute", l[0]}, {"ceiling_memory", l[1]}, {"ceiling_memory_1thread", l[2]}});
  return out;
}

}  // namespace engine::bench
