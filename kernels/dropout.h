// kernels/dropout.h: the dropout keep/scale decision, shared by CPU and CUDA so that masks match
// across devices. Element (or channel) i of a call draws philox_uniform(seed, offset, i) and is
// kept when the draw is >= p; the caller reserves offset with Generator::reserve(count).
#pragma once
#include <cstdint>

#include "core/rng.h"

namespace engine::kernels {

// Whether element i survives. p = 0 keeps all (draws are >= 0), p = 1 keeps none (draws < 1).
ENGINE_HD bool dropout_keep(uint64_t seed, uint64_t offset, uint64_t i, float p) {
  return philox_uniform(seed, offset, i) >= p;
}

// The four decisions of elements 4g .. 4g+3 from one Philox call (same as four dropout_keep).
ENGINE_HD void dropout_keep4(uint64_t seed, uint64_t offset, uint64_t g, float p, bool keep[4]) {
  Philox4 r = philox4x32(offset + g, 0, seed);
  for (int j = 0; j < 4; ++j) keep[j] = uint_to_unit_float(r.v[j]) >= p;
}

// Dropout by global position (the kernels' _at variants): a global batch of B images of E
// elements each (E = 1 plane per channel for dropout2d) is one stream: the layer reserves
// Generator::reserve(B * E) once per call (the same count on every rank, so the offsets agree at
// every world size) and the call over images [g0, g1) passes first = g0 * E. Element e of the
// global batch then draws philox_uniform(seed, offset, e), whichever rank holds it and however
// many images a call covers; at g0 = 0 over the whole batch these are the default masks.

// Survivors are scaled by 1/(1-p) (torch divides by the float of 1-p); p = 1 scales by 0.
ENGINE_HD float dropout_scale(float p) {
  return p >= 1.f ? 0.f : 1.f / static_cast<float>(1.0 - static_cast<double>(p));
}

ENGINE_HD float dropout_apply(float x, bool keep, float scale) {
  return keep ? x * scale : 0.f;
}

// Where the CUDA dropout kernels of the calling thread take their Philox offset. Eager (base
// null): the launch's own offset, as on the CPU. While a CUDA graph is captured, its owner
// (parallel/step_graph.h) points base at a device counter and sets host_base to the generator's
// offset at the capture's start: a launch then passes offset - host_base, and the kernel adds
// *base, read when it runs. The owner writes the generator's offset into *base before each replay,
// so every replay draws fresh masks, the very masks an eager step at that position would draw.
struct DropoutOffsetSource {
  const uint64_t* base = nullptr;  // device memory; null: eager
  uint64_t host_base = 0;
};
inline DropoutOffsetSource& dropout_offset_source() {
  static thread_local DropoutOffsetSource source;
  return source;
}

// The offset a kernel uses: rel alone when eager, *base + rel under a graph.
ENGINE_HD uint64_t dropout_offset(const uint64_t* base, uint64_t rel) {
  return base ? *base + rel : rel;
}

}  // namespace engine::kernels
