// core/cuda_backend.h: the CUDA side of core's device plumbing: device discovery, the caching
// allocator, host<->device copies and core's elementwise kernels (fill, axpy, scale).
// Implemented in core/cuda/*.cu when the build has CUDA (ENGINE_WITH_CUDA), and by
// core/cuda_absent.cpp otherwise, where every call but device_count() throws engine::Error.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/allocator.h"
#include "core/device.h"

namespace engine::cuda {

int device_count();                // 0 when no driver or GPU answers
std::string unavailable_reason();  // "" when a device answers

// Caching allocator: blocks binned by size class, reused after free, per device.
void* alloc(int device, size_t nbytes);
void free(int device, void* p, size_t nbytes);
AllocatorStats stats(int device);
void empty_cache(int device);

// Copies nbytes between any two of host and device memory; synchronous for the caller.
void copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t nbytes);

// Elementwise on device memory (float32): p[i] = v; dst[i] += alpha * src[i]; p[i] *= s.
void fill_f32(int device, float* p, float v, int64_t n);
void axpy_f32(int device, float* dst, const float* src, float alpha, int64_t n);
void scale_f32(int device, float* p, float s, int64_t n);

}  // namespace engine::cuda
