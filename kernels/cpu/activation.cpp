// kernels/cpu/activation.cpp: ReLU loops around kernels/activation.h.
#include "kernels/cpu/activation.h"

#include "core/thread_pool.h"

namespace engine::kernels::cpu {
namespace {
constexpr int64_t kGrain = 1 << 15;
}

void relu_forward(const float* x, float* y, int64_t count) {
  parallel_for(count, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = relu(x[i]);
  });
}

void relu_backward(const float* dy, const float* y, float* dx, int64_t count) {
  parallel_for(count, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dx[i] = relu_grad(dy[i], y[i]);
  });
}

}  // namespace engine::kernels::cpu
