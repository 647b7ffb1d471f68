// tests/kernels/test_dropout_global.cpp: dropout by global position (kernels/dropout.h): the _at
// kernels at first 0 are the default ones bit for bit; a global batch's masks are the same
// whichever shares of it the calls cover (1, 16, 48 or 128 images from any first image, 1 or 2
// threads) at every dropout site of the models (net's 50 features: not a multiple of 4; net's
// dropout2d); the default dropout, each rank drawing its own share, would not give them.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "kernels/cpu/dropout.h"
#include "kernels/testing/sites.h"
#include "tests/common/test_util.h"
#include "tests/common/thread_guard.h"

namespace engine::kernels {
namespace {

using engine::testing::filled;
using engine::testing::ThreadCount;

constexpr int64_t kBatch = 128;
constexpr uint64_t kSeed = 42;
constexpr float kP = 0.5f;

struct Share {
  int64_t n, first;
  int threads;
};
const Share kShares[] = {{1, 77, 1}, {16, 16, 2}, {16, 112, 1}, {48, 5, 2}, {128, 0, 1}};

// Counts chosen to leave partial groups of 4 and blocks of 64, at one and two threads (big
// enough for the pool to split).
TEST(DropoutGlobal, AtFirstZeroIsTheDefaultDropout) {
  for (int threads : {1, 2})
    for (int64_t count : {1, 3, 5, 63, 64, 66, 1000, 70001}) {
      ThreadCount t(threads);
      const auto x = filled(count, 1);
      std::vector<float> a(x.size()), b(x.size());
      std::vector<uint8_t> ma(x.size()), mb(x.size());
      cpu::dropout_forward_mask(x.data(), a.data(), ma.data(), count, kP, kSeed, 9);
      cpu::dropout_forward_mask_at(x.data(), b.data(), mb.data(), count, kP, kSeed, 9, 0);
      EXPECT_EQ(a, b) << count;
      EXPECT_EQ(ma, mb) << count;
      cpu::dropout_backward(x.data(), a.data(), count, kP, kSeed, 9);
      cpu::dropout_backward_at(x.data(), b.data(), count, kP, kSeed, 9, 0);
      EXPECT_EQ(a, b) << count;
      cpu::dropout2d_forward(x.data(), a.data(), count, 1, kP, kSeed, 9);
      cpu::dropout2d_forward_at(x.data(), b.data(), count, 1, kP, kSeed, 9, 0);
      EXPECT_EQ(a, b) << count;
    }
}

// A call over elements [first, first + count) of a stream gives the stream's decisions there:
// the AVX-512 blocks and the head before a group of 4 agree with dropout_keep.
TEST(DropoutGlobal, ASliceDrawsAsTheStream) {
  const int64_t total = 300;
  std::vector<uint8_t> want(total);
  cpu::dropout_mask(want.data(), total, kP, kSeed, 5);
  const auto x = filled(total, 2);
  for (int64_t first : {0, 1, 2, 3, 4, 61, 130})
    for (int64_t count : {1, 2, 7, 64, 100}) {
      std::vector<float> y(count);
      std::vector<uint8_t> m(count);
      cpu::dropout_forward_mask_at(x.data() + first, y.data(), m.data(), count, kP, kSeed, 5,
                                   first);
      for (int64_t i = 0; i < count; ++i) {
        ASSERT_EQ(m[i], want[first + i]) << "first " << first << ", count " << count << ", i " << i;
        ASSERT_EQ(y[i], want[first + i] ? x[first + i] * 2.f : 0.f);
      }
    }
}

// y of the whole batch in one call, and y of each share, at a model's dropout site: per image,
// `planes` planes of plane_size floats (elementwise dropout: one plane; a stream element per
// float, or per plane for dropout2d).
void expect_shares_agree(const testing::DropoutSite& site) {
  Generator g(kSeed);
  g.reserve(12345);                                     // a step with earlier draws
  const int64_t elems = site.planes * site.plane_size;  // floats per image
  const int64_t draws = site.per_plane ? site.planes : elems;
  const uint64_t offset = g.reserve(kBatch * draws);
  const auto run = [&](const float* x, float* y, int64_t images, int64_t first_image) {
    const auto first = static_cast<uint64_t>(first_image * draws);
    if (site.per_plane)
      cpu::dropout2d_forward_at(x, y, images * site.planes, site.plane_size, site.p, kSeed, offset,
                                first);
    else
      cpu::dropout_forward_at(x, y, images * elems, site.p, kSeed, offset, first);
  };
  const auto x = filled(kBatch * elems, 3);
  std::vector<float> whole(x.size());
  run(x.data(), whole.data(), kBatch, 0);
  for (const Share& s : kShares) {
    ThreadCount t(s.threads);
    std::vector<float> y(static_cast<size_t>(s.n * elems));
    run(x.data() + s.first * elems, y.data(), s.n, s.first);
    const std::vector<float> want(whole.begin() + s.first * elems,
                                  whole.begin() + (s.first + s.n) * elems);
    EXPECT_EQ(y, want) << site.model << " " << site.layer << ": " << s.n << " images from "
                       << s.first << ", " << s.threads << " thread(s)";
  }
}

TEST(DropoutGlobal, SharesOfAGlobalBatchDrawItsMasks) {
  for (const auto& site : testing::dropout_sites()) expect_shares_agree(site);
}

// The default dropout of two ranks, each reserving its own 64 images from the same generator
// state, gives rank 1 other masks than one process's call over the 128 (about half of them
// differ at p = 0.5): the difference dropout by global position removes.
TEST(DropoutGlobal, PerRankDefaultDropoutWouldDiffer) {
  const int64_t per_image = 128, half = kBatch / 2 * per_image;
  std::vector<uint8_t> one(kBatch * per_image), rank1(half);
  Generator g1(kSeed), g2(kSeed);
  cpu::dropout_mask(one.data(), kBatch * per_image, kP, kSeed, g1.reserve(kBatch * per_image));
  cpu::dropout_mask(rank1.data(), half, kP, kSeed, g2.reserve(half));
  int64_t differ = 0;
  for (int64_t i = 0; i < half; ++i) differ += rank1[i] != one[half + i];
  EXPECT_GT(differ, half / 4);
}

}  // namespace
}  // namespace engine::kernels
