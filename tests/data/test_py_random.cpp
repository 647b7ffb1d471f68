// Tests data/py_random.h against values printed by CPython 3.11 (commands in the comments).
#include <gtest/gtest.h>

#include <numeric>

#include "core/error.h"
#include "data/py_random.h"

namespace engine::data {
namespace {

std::vector<uint64_t> draws32(PyRandom r, int n) {
  std::vector<uint64_t> out;
  for (int i = 0; i < n; ++i) out.push_back(r.getrandbits(32));
  return out;
}

TEST(PyRandom, SeedsLikeCPython) {
  // r=random.Random(1234); print([r.getrandbits(32) for _ in range(5)])
  EXPECT_EQ(draws32(PyRandom(1234), 5),
            (std::vector<uint64_t>{4150886329, 3342196574, 1892932127, 501869158, 32175636}));
  // Seed 0 seeds with key [0]: random.Random(0)
  EXPECT_EQ(draws32(PyRandom(0), 3), (std::vector<uint64_t>{3626764237, 1654615998, 3255389356}));
  // A two-word key: random.Random(2**40 + 5)
  EXPECT_EQ(draws32(PyRandom((int64_t{1} << 40) + 5), 3),
            (std::vector<uint64_t>{2166296868, 2220160828, 1153647273}));
  // Negative seeds use the absolute value: random.Random(-7) == random.Random(7)
  EXPECT_EQ(draws32(PyRandom(-7), 2), (std::vector<uint64_t>{1390851128, 4071050724}));
  EXPECT_EQ(draws32(PyRandom(7), 2), (std::vector<uint64_t>{1390851128, 4071050724}));
  // random.Random(2**64 - 1)
  EXPECT_EQ(draws32(PyRandom::from_unsigned(~uint64_t{0}), 2),
            (std::vector<uint64_t>{93740670, 1068495656}));
}

TEST(PyRandom, GetrandbitsWidths) {
  // r=random.Random(42); print([r.getrandbits(k) for k in (1,5,31,33,48,64,0)])
  PyRandom r(42);
  std::vector<uint64_t> got;
  for (int k : {1, 5, 31, 33, 48, 64, 0}) got.push_back(r.getrandbits(k));
  EXPECT_EQ(got, (std::vector<uint64_t>{1, 3, 53710184, 3184935163, 62827833408400,
                                        13585496030504862185ull, 0}));
  EXPECT_THROW(r.getrandbits(65), Error);
}

TEST(PyRandom, Randbelow) {
  // r=random.Random(42); print([r._randbelow(n) for n in (1,2,3,10,1000,2**33+1,7)])
  PyRandom r(42);
  std::vector<uint64_t> got;
  for (uint64_t n : {uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{10}, uint64_t{1000},
                     (uint64_t{1} << 33) + 1, uint64_t{7}}) {
    got.push_back(r.randbelow(n));
  }
  EXPECT_EQ(got, (std::vector<uint64_t>{0, 0, 2, 4, 250, 958682846, 5}));
  // r=random.Random(99); print([r._randbelow(n) for n in (2**63+12345, 2**64-1, 5)])
  PyRandom q(99);
  EXPECT_EQ(q.randbelow((uint64_t{1} << 63) + 12345), 7023646418445998953ull);
  EXPECT_EQ(q.randbelow(~uint64_t{0}), 11057699771802723582ull);
  EXPECT_EQ(q.randbelow(5), 1u);
  EXPECT_THROW(q.randbelow(0), Error);
}

TEST(PyRandom, Random) {
  // r=random.Random(42); print(repr(r.random()), repr(r.random()))
  PyRandom r(42);
  EXPECT_EQ(r.random(), 0.6394267984578837);
  EXPECT_EQ(r.random(), 0.025010755222666936);
}

TEST(PyRandom, Shuffle) {
  // l=list(range(5)); random.Random(0).shuffle(l); print(l)
  std::vector<int> small = {0, 1, 2, 3, 4};
  PyRandom(0).shuffle(small);
  EXPECT_EQ(small, (std::vector<int>{2, 1, 0, 4, 3}));
  std::vector<int> empty, one = {9};
  PyRandom(0).shuffle(empty);
  PyRandom(0).shuffle(one);
  EXPECT_EQ(one, std::vector<int>{9});
}

TEST(PyRandom, Shuffle60000MatchesCPython) {
  // l=list(range(60000)); random.Random(1234).shuffle(l); print(l[:20], l[-5:])
  std::vector<int64_t> l(60000);
  std::iota(l.begin(), l.end(), 0);
  PyRandom(1234).shuffle(l);
  EXPECT_EQ(
      std::vector<int64_t>(l.begin(), l.begin() + 20),
      (std::vector<int64_t>{33712, 36159, 45528, 25849, 53734, 40353, 32418, 55928, 38521, 21823,
                            15630, 53486, 42658, 4899,  9832,  18628, 39371, 39211, 58610, 37514}));
  EXPECT_EQ(std::vector<int64_t>(l.end() - 5, l.end()),
            (std::vector<int64_t>{5940, 490, 7657, 28883, 50997}));
}

}  // namespace
}  // namespace engine::data
