// kernels/cpu/bf16_ops.cpp: the bf16 layers by rounding: each operand is rounded to bf16 into an
// fp32 buffer, and the fp32 kernels multiply the rounded values (every product of two bf16 values
// is exact in fp32, so this is bf16 multiplication with fp32 accumulation). The reference the
// vdpbf16ps kernels are checked against.
#include "kernels/cpu/bf16_ops.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "core/allocator.h"
#include "core/thread_pool.h"
#include "kernels/cpu/conv2d.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/linear.h"

namespace engine::kernels::cpu {
namespace {

// A rounded copy of src in a block of the CPU allocator's cache, freed on scope exit.
class Rounded {
 public:
  Rounded(const float* src, int64_t count)
      : n_(static_cast<size_t>(count > 0 ? count : 1) * sizeof(float)),
        p_(static_cast<float*>(cpu_allocator::alloc(n_))) {
    round_to_bf16(src, p_, count);
  }
  ~Rounded() { cpu_allocator::free(p_, n_); }
  Rounded(const Rounded&) = delete;
  Rounded& operator=(const Rounded&) = delete;
  const float* get() const { return p_; }

 private:
  size_t n_;
  float* p_;
};

}  // namespace

float round_to_bf16(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  if (std::isnan(x)) return std::bit_cast<float>((u | 0x00400000u) & 0xFFFF0000u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return std::bit_cast<float>(u & 0xFFFF0000u);
}

void round_to_bf16(const float* src, float* dst, int64_t count) {
  parallel_for(count, 1 << 14, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) dst[i] = round_to_bf16(src[i]);
  });
}

void linear_forward_bf16(const float* x, const float* w, const float* b, float* y,
                         const LinearShape& s) {
  require_avx512_bf16("linear in bf16");
  Rounded xr(x, s.n * s.in), wr(w, s.out * s.in);
  linear_forward(xr.get(), wr.get(), b, y, s);
}

void linear_backward_data_bf16(const float* dy, const float* w, float* dx, const LinearShape& s) {
  require_avx512_bf16("linear in bf16");
  Rounded dyr(dy, s.n * s.out), wr(w, s.out * s.in);
  linear_backward_data(dyr.get(), wr.get(), dx, s);
}

void linear_backward_weight_bf16(const float* dy, const float* x, float* dw, const LinearShape& s,
                                 float beta) {
  require_avx512_bf16("linear in bf16");
  Rounded dyr(dy, s.n * s.out), xr(x, s.n * s.in);
  linear_backward_weight(dyr.get(), xr.get(), dw, s, beta);
}

void conv2d_forward_bf16(const float* x, const float* w, const float* b, float* y,
                         const Conv2dShape& s) {
  require_avx512_bf16("conv2d in bf16");
  Rounded xr(x, s.x_count()), wr(w, s.w_count());
  conv2d_forward(xr.get(), wr.get(), b, y, s);
}

void conv2d_backward_data_bf16(const float* dy, const float* w, float* dx, const Conv2dShape& s) {
  require_avx512_bf16("conv2d in bf16");
  Rounded dyr(dy, s.y_count()), wr(w, s.w_count());
  conv2d_backward_data(dyr.get(), wr.get(), dx, s);
}

void conv2d_backward_filter_bf16(const float* x, const float* dy, float* dw, float* db,
                                 const Conv2dShape& s, float beta) {
  require_avx512_bf16("conv2d in bf16");
  if (db) conv2d_backward_bias(dy, db, s, beta);  // fp32 sum of the unrounded dy
  Rounded xr(x, s.x_count()), dyr(dy, s.y_count());
  conv2d_backward_filter(xr.get(), dyr.get(), dw, nullptr, s, beta);
}

}  // namespace engine::kernels::cpu
