// kernels/choice.h: which CUDA kernels the ops run, for the whole process. Library: cuDNN, cuBLAS
// and the other kernels (the process's default, for programs that do not choose). Engine: the
// engine's own deterministic kernels (convolution and pool backwards, GEMMs with their bias, the
// fused multi-tensor optimizer): train's default, which ENGINE_CUDA_KERNELS changes (core/knobs.h;
// figures in docs/gpu_bench/h200-6313feb.md). The CPU ignores the choice: it has one set of
// kernels.
#pragma once
#include <string>

namespace engine::kernels {

enum class CudaKernels { Library, Engine };

void set_cuda_kernels(CudaKernels k);
CudaKernels cuda_kernels();
// "library" or "engine"; parse_cuda_kernels throws engine::Error naming the value otherwise.
const char* cuda_kernels_name(CudaKernels k);
CudaKernels parse_cuda_kernels(const std::string& name);

}  // namespace engine::kernels
