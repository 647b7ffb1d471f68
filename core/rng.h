// core/rng.h: the engine's random numbers: Philox4x32-10, counter-based, so that a (seed, offset)
// pair names every draw. CPU and CUDA compute the same numbers (dropout masks match across
// devices) and a generator's whole state is two integers, which checkpoints save.
#pragma once
#include <cstdint>

#include "core/hd.h"

namespace engine {

struct Philox4 {
  uint32_t v[4];
};

// Philox4x32-10 (Salmon et al. 2011): 4 random 32-bit words for counter ctr under key.
ENGINE_HD Philox4 philox4x32(uint64_t ctr_lo, uint64_t ctr_hi, uint64_t key) {
  uint32_t c0 = static_cast<uint32_t>(ctr_lo), c1 = static_cast<uint32_t>(ctr_lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(ctr_hi), c3 = static_cast<uint32_t>(ctr_hi >> 32);
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int r = 0; r < 10; ++r) {
    uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

// Uniform float in [0, 1) from 24 random bits.
ENGINE_HD float uint_to_unit_float(uint32_t x) {
  return (x >> 8) * (1.0f / 16777216.0f);
}

// The i-th uniform [0,1) number of the stream (seed, offset): element i uses counter
// (offset + i/4, 0), word i%4. Shared by CPU and CUDA dropout.
ENGINE_HD float philox_uniform(uint64_t seed, uint64_t offset, uint64_t i) {
  Philox4 r = philox4x32(offset + (i >> 2), 0, seed);
  return uint_to_unit_float(r.v[i & 3]);
}

// A stream of draws: state is (seed, offset); each call to next_offset reserves counters.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) {
    seed_ = seed;
    offset_ = offset;
  }
  // Reserves enough counters for n draws and returns the first counter.
  uint64_t reserve(uint64_t n) {
    uint64_t o = offset_;
    offset_ += (n + 3) / 4;
    return o;
  }
  float uniform() { return philox_uniform(seed_, reserve(1), 0); }
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The process-wide generator for parameter init and dropout (like torch.manual_seed's).
Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace engine
