// core/hd.h: ENGINE_HD marks a small function in a header as callable from host and device code
// (kernels/ shapes and window arithmetic, the RNG). Inline, so a header may define it.
#pragma once

#if defined(__CUDACC__)
#define ENGINE_HD __host__ __device__ __forceinline__
#else
#define ENGINE_HD inline
#endif
