// data/shuffle.h: the data layer's own seeded shuffles (sampler and loader): splitmix64 seeding,
// a xoshiro256** stream, unbiased bounded draws and Fisher-Yates. Fully specified here, so the
// same seed gives the same order on every platform and compiler (unlike std::shuffle).
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

namespace engine::data {

// splitmix64's finaliser: a bijective, well-mixed 64-bit hash (Steele et al. 2014).
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Hashes several values into one seed: each value is mixed in with its position, so (a, b) and
// (b, a) differ and no two small inputs collide the way seed + rank would.
inline uint64_t hash_seed(std::initializer_list<uint64_t> values) {
  uint64_t h = 0x6a09e667f3bcc909ull;
  for (uint64_t v : values) h = mix64(h ^ mix64(v + 0x9e3779b97f4a7c15ull));
  return h;
}

// xoshiro256** (Blackman & Vigna), state filled from splitmix64 of the seed.
class ShuffleRng {
 public:
  explicit ShuffleRng(uint64_t seed) {
    for (auto& w : s_) {
      seed += 0x9e3779b97f4a7c15ull;
      w = mix64(seed);
    }
  }
  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, n), n >= 1, unbiased (Lemire's multiply-and-reject).
  uint64_t below(uint64_t n) {
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

// Fisher-Yates: for i = n-1 .. 1, swap(x[i], x[below(i + 1)]).
template <class T>
void shuffle_with_seed(std::vector<T>& x, uint64_t seed) {
  ShuffleRng rng(seed);
  for (std::size_t i = x.size(); i-- > 1;) std::swap(x[i], x[rng.below(i + 1)]);
}

}  // namespace engine::data
