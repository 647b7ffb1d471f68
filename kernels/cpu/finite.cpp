// kernels/cpu/finite.cpp: see finite.h. The scan ORs the exponent test over 16 elements at a
// time (the compiler vectorises the plain loop), with no early exit: the finite case, which is
// every step of a healthy run, reads each element once.
#include "kernels/cpu/finite.h"

#include <atomic>

#include "core/thread_pool.h"
#include "kernels/finite.h"

namespace engine::kernels::cpu {
namespace {
constexpr int64_t kGrain = 1 << 16;

bool any_nonfinite(const float* x, int64_t b, int64_t e) {
  uint32_t bad = 0;
  for (int64_t i = b; i < e; ++i) bad |= finite_bits(x[i]) ? 0u : 1u;
  return bad != 0;
}
}  // namespace

void flag_nonfinite(const float* x, int64_t count, float* flag) {
  if (count <= kGrain) {
    if (any_nonfinite(x, 0, count)) *flag = 1.0f;
    return;
  }
  parallel_for(count, kGrain, [&](int64_t b, int64_t e) {
    if (any_nonfinite(x, b, e))
      std::atomic_ref<float>(*flag).store(1.0f, std::memory_order_relaxed);
  });
}

void finite_seed(const float* loss, float* seed) {
  seed[0] = kernels::finite_seed(loss[0]);
}

}  // namespace engine::kernels::cpu
