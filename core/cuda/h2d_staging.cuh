// core/cuda/h2d_staging.cuh: host -> device copies whose pageable source the caller may free or
// reuse as soon as the call returns, queued on the device's compute stream without a host wait
// (staged through a per-device ring of pinned memory; see h2d_staging.cu).
#pragma once
#include <cstddef>

namespace engine::cuda {

void upload_pageable(void* dst, const void* src, size_t nbytes, int device);

}  // namespace engine::cuda
