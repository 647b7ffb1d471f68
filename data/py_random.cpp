// data/py_random.cpp: MT19937 as in CPython's Modules/_randommodule.c.
#include "data/py_random.h"

#include <bit>

#include "core/error.h"

namespace engine::data {
namespace {
constexpr int kM = 397;
constexpr uint32_t kMatrixA = 0x9908b0dfu;
constexpr uint32_t kUpperMask = 0x80000000u;
constexpr uint32_t kLowerMask = 0x7fffffffu;
}  // namespace

PyRandom::PyRandom(int64_t seed) {
  // |INT64_MIN| does not fit int64; its magnitude as uint64 is exact.
  uint64_t mag = seed < 0 ? ~static_cast<uint64_t>(seed) + 1 : static_cast<uint64_t>(seed);
  *this = from_unsigned(mag);
}

PyRandom PyRandom::from_unsigned(uint64_t seed) {
  PyRandom r;
  uint32_t key[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  r.init_by_array(key, key[1] != 0 ? 2 : 1);  // keyused = max(1, words needed)
  return r;
}

void PyRandom::init_genrand(uint32_t s) {
  mt_[0] = s;
  for (int i = 1; i < kN; ++i) {
    mt_[i] = 1812433253u * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + static_cast<uint32_t>(i);
  }
  mti_ = kN;
}

void PyRandom::init_by_array(const uint32_t* key, size_t len) {
  init_genrand(19650218u);
  size_t i = 1, j = 0;
  for (size_t k = (kN > len ? kN : len); k; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525u)) + key[j] +
             static_cast<uint32_t>(j);
    ++i;
    ++j;
    if (i >= static_cast<size_t>(kN)) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
    if (j >= len) j = 0;
  }
  for (size_t k = kN - 1; k; --k) {
    mt_[i] =
        (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941u)) - static_cast<uint32_t>(i);
    ++i;
    if (i >= static_cast<size_t>(kN)) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
  }
  mt_[0] = 0x80000000u;  // MSB is 1, assuring a non-zero initial array
}

uint32_t PyRandom::genrand_uint32() {
  static constexpr uint32_t mag01[2] = {0u, kMatrixA};
  if (mti_ >= kN) {
    int kk = 0;
    for (; kk < kN - kM; ++kk) {
      uint32_t y = (mt_[kk] & kUpperMask) | (mt_[kk + 1] & kLowerMask);
      mt_[kk] = mt_[kk + kM] ^ (y >> 1) ^ mag01[y & 1u];
    }
    for (; kk < kN - 1; ++kk) {
      uint32_t y = (mt_[kk] & kUpperMask) | (mt_[kk + 1] & kLowerMask);
      mt_[kk] = mt_[kk + (kM - kN)] ^ (y >> 1) ^ mag01[y & 1u];
    }
    uint32_t y = (mt_[kN - 1] & kUpperMask) | (mt_[0] & kLowerMask);
    mt_[kN - 1] = mt_[kM - 1] ^ (y >> 1) ^ mag01[y & 1u];
    mti_ = 0;
  }
  uint32_t y = mt_[mti_++];
  y ^= (y >> 11);
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= (y >> 18);
  return y;
}

uint64_t PyRandom::getrandbits(int k) {
  ENGINE_CHECK(k >= 0 && k <= 64, "PyRandom::getrandbits: k must be in 0..64, got ", k);
  if (k == 0) return 0;
  if (k <= 32) return genrand_uint32() >> (32 - k);
  uint64_t lo = genrand_uint32();
  uint64_t hi = genrand_uint32() >> (64 - k);
  return lo | (hi << 32);
}

uint64_t PyRandom::randbelow(uint64_t n) {
  ENGINE_CHECK(n >= 1, "PyRandom::randbelow: n must be >= 1, got 0");
  const int k = std::bit_width(n);
  uint64_t r = getrandbits(k);
  while (r >= n) r = getrandbits(k);
  return r;
}

double PyRandom::random() {
  uint32_t a = genrand_uint32() >> 5, b = genrand_uint32() >> 6;
  return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

}  // namespace engine::data
