// kernels/dispatch.h: one call per op for either device. An op has a CPU function
// kernels::cpu::op(args...) and a CUDA function kernels::cuda::op(int device, args...) with the
// same arguments after the device; kernels::call picks one by the tensors' device:
//   kernels::call(dev, cpu::relu_forward, cuda::relu_forward, x, y, count);
// The compiler checks that both take the same arguments (the CUDA one's type is
// void(int, Args...), the CPU one's void(Args...)). The choice is made per op call, not per
// element; in a build without CUDA the CUDA functions are stubs that throw (kernels/cuda/ops.h).
// Three fused CPU passes have no CUDA function and are called directly, on the CPU only:
// cpu::conv2d_pool_forward, cpu::batch_norm_train_stats and cpu::max_pool2d_affine_forward
// (nn/functional.cpp runs the separate ops through kernels::call on a GPU).
#pragma once
#include <type_traits>

#include "core/device.h"

namespace engine::kernels {

template <class... Args>
inline void call(Device d, void (*cpu_fn)(Args...), void (*cuda_fn)(int, Args...),
                 std::type_identity_t<Args>... args) {
  if (d.is_cuda())
    cuda_fn(d.index, args...);
  else
    cpu_fn(args...);
}

}  // namespace engine::kernels
