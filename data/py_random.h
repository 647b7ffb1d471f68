// data/py_random.h: CPython's random.Random (MT19937), bit-for-bit for the calls the tutorials'
// DataPartitioner makes: Random(int seed), getrandbits, _randbelow, shuffle, random.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace engine::data {

class PyRandom {
 public:
  // random.Random(seed) for an int seed: init_by_array over the 32-bit words of |seed|, least
  // significant first (seed 0 -> key [0]). Negative seeds seed like their absolute value.
  explicit PyRandom(int64_t seed);
  // For seeds >= 2^63.
  static PyRandom from_unsigned(uint64_t seed);

  uint32_t genrand_uint32();       // the raw MT19937 output
  uint64_t getrandbits(int k);     // k in 0..64; low 32-bit word drawn first, as CPython does
  uint64_t randbelow(uint64_t n);  // _randbelow: k = n.bit_length(), reject r >= n; n >= 1
  double random();                 // random.random(): 53 bits from two draws

  // random.shuffle as in CPython 3.11: for i in reversed(range(1, len)): swap(x[i],
  // x[randbelow(i+1)])
  template <class T>
  void shuffle(std::vector<T>& x) {
    for (std::size_t i = x.size(); i-- > 1;) {
      std::size_t j = static_cast<std::size_t>(randbelow(i + 1));
      std::swap(x[i], x[j]);
    }
  }

 private:
  PyRandom() = default;
  void init_genrand(uint32_t s);
  void init_by_array(const uint32_t* key, std::size_t len);

  static constexpr int kN = 624;
  std::array<uint32_t, kN> mt_{};
  int mti_ = kN + 1;
};

}  // namespace engine::data
