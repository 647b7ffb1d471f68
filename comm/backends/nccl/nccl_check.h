// comm/backends/nccl/nccl_check.h: NCCL_CHECK, the way comm code checks an NCCL call that must
// succeed (ncclInProgress from a non-blocking communicator is not a failure: see nccl_group.cpp).
// Only in builds with CUDA (ENGINE_WITH_CUDA), where nccl.h is on the include path.
#pragma once
#ifdef ENGINE_WITH_CUDA
#include <nccl.h>

namespace engine::comm {

// Throws engine::Error "NCCL error at FILE:LINE: EXPR: <ncclGetErrorString> (<last error>)".
[[noreturn]] void nccl_fail(ncclResult_t r, const char* expr, const char* file, int line,
                            ncclComm_t comm = nullptr);

}  // namespace engine::comm

#define NCCL_CHECK(expr)                                                    \
  do {                                                                      \
    const ncclResult_t engine_nccl_r_ = (expr);                             \
    if (engine_nccl_r_ != ncclSuccess && engine_nccl_r_ != ncclInProgress)  \
      ::engine::comm::nccl_fail(engine_nccl_r_, #expr, __FILE__, __LINE__); \
  } while (0)

#endif  // ENGINE_WITH_CUDA
