// dev/cpu/reduce_sum_bench.cpp: does the host ring's element loop (comm::reduce_into, which
// dispatches on the dtype to kernels/cpu/reduce.cpp) run as fast as the plain loop a reader would
// write inline? For F32 and BF16 sums: checks both bit for bit first, then times each (best of
// --reps) and prints GB/s counting the bytes read and written (3 x count x element size).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "apps/program.h"
#include "comm/base/reduce.h"
#include "kernels/half.h"

namespace {

using engine::DType;
using engine::kernels::bf16_from_f32;
using engine::kernels::f32_from_bf16;

const char kUsage[] =
    "usage: reduce_sum_bench [--count N] [--reps N]\n"
    "\n"
    "A dev/ experiment (dev/README.md): times comm::reduce_into against a plain inline loop\n"
    "for dst[i] += src[i] in F32 and BF16, after checking that both give the same bits.";

void plain_f32(float* d, const float* s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] += s[i];
}

void plain_bf16(uint16_t* d, const uint16_t* s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = bf16_from_f32(f32_from_bf16(d[i]) + f32_from_bf16(s[i]));
}

// The best time in seconds of reps runs of f(dst, src), each on a fresh copy of dst0.
template <class T, class F>
double best_seconds(const std::vector<T>& dst0, const std::vector<T>& src, int64_t reps, F f) {
  std::vector<T> dst(dst0.size());
  double best = 1e30;
  for (int64_t r = 0; r < reps; ++r) {
    std::copy(dst0.begin(), dst0.end(), dst.begin());
    const auto t0 = std::chrono::steady_clock::now();
    f(dst.data(), src.data());
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    best = std::min(best, dt.count());
  }
  return best;
}

// Checks the two loops against each other on (dst0, src), then prints a row for each.
template <class T, class Lib, class Plain>
void compare(const char* dtype, const std::vector<T>& dst0, const std::vector<T>& src, int64_t reps,
             Lib lib, Plain plain) {
  std::vector<T> a = dst0, b = dst0;
  lib(a.data(), src.data());
  plain(b.data(), src.data());
  ENGINE_CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0, dtype,
               ": comm::reduce_into and the plain loop differ");
  const double bytes = 3.0 * static_cast<double>(src.size() * sizeof(T));
  const double t_lib = best_seconds(dst0, src, reps, lib);
  const double t_plain = best_seconds(dst0, src, reps, plain);
  std::printf("%-5s %-18s %10zu %10.1f %8.2f\n", dtype, "comm::reduce_into", src.size(),
              t_lib * 1e6, bytes / t_lib / 1e9);
  std::printf("%-5s %-18s %10zu %10.1f %8.2f\n", dtype, "plain loop", src.size(), t_plain * 1e6,
              bytes / t_plain / 1e9);
}

int run(int argc, char** argv) {
  using namespace engine;
  apps::Flags flags(kUsage);
  int64_t count = int64_t{1} << 22, reps = 20;
  flags.add("count", &count, "elements per buffer");
  flags.add("reps", &reps, "timed runs of each loop; the best is printed");
  if (!flags.parse(argc, argv)) return 0;
  ENGINE_USAGE_CHECK(flags.rest().empty(), "unexpected argument '", flags.rest()[0], "'");
  ENGINE_USAGE_CHECK(count >= 1 && count <= (int64_t{1} << 30),
                     "--count must be in [1, 2^30], got ", count);
  ENGINE_USAGE_CHECK(reps >= 1, "--reps must be at least 1, got ", reps);
  const auto n = static_cast<size_t>(count);

  std::vector<float> d32(n), s32(n);
  std::vector<uint16_t> d16(n), s16(n);
  for (size_t i = 0; i < n; ++i) {  // values unique to the position, in a range bf16 rounds
    d32[i] = static_cast<float>(i % 1000) * 0.001f;
    s32[i] = static_cast<float>((i * 7) % 997) * 0.01f;
    d16[i] = bf16_from_f32(d32[i]);
    s16[i] = bf16_from_f32(s32[i]);
  }
  std::printf("%-5s %-18s %10s %10s %8s\n", "dtype", "loop", "count", "best_us", "GB/s");
  compare(
      "f32", d32, s32, reps,
      [n](float* d, const float* s) {
        comm::reduce_into(d, s, n, DType::F32, comm::ReduceOp::Sum);
      },
      [count](float* d, const float* s) { plain_f32(d, s, count); });
  compare(
      "bf16", d16, s16, reps,
      [n](uint16_t* d, const uint16_t* s) {
        comm::reduce_into(d, s, n, DType::BF16, comm::ReduceOp::Sum);
      },
      [count](uint16_t* d, const uint16_t* s) { plain_bf16(d, s, count); });
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return engine::apps::run_program("reduce_sum_bench", argc, argv, run);
}
