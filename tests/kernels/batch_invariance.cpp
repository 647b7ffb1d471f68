// tests/kernels/batch_invariance.cpp: the shared checks of batch_invariance.h.
#include "tests/kernels/batch_invariance.h"

#include <algorithm>
#include <cmath>

#include "tests/common/test_util.h"
#include "tests/common/thread_guard.h"

namespace engine::testing {
namespace {

// A call's share: n samples from sample `first`, in place (shift < 0) or copied to buffers
// `shift` floats past a 64-byte boundary, on `threads` threads.
struct Share {
  int64_t n, first;
  int shift, threads;
};
const Share kShares[] = {{128, 0, -1, 1}, {1, 77, 1, 2},   {16, 16, -1, 1},
                         {16, 112, 3, 2}, {48, 32, -1, 2}, {48, 5, 1, 1}};

// Where a chunk of 16 sits: sample `at` of a batch of `batch`, read as Share's shift says.
struct Placement {
  int64_t batch, at;
  int shift, threads;
};
const Placement kPlacements[] = {
    {16, 0, -1, 1}, {48, 32, -1, 2}, {128, 112, -1, 1}, {128, 48, 1, 2}, {16, 0, 3, 2}};

// n values in [-1, 1) from a 64-bit LCG: the activations of a whole batch, millions of floats,
// where Philox per element (filled) took most of a test's time.
std::vector<float> quick_filled(int64_t n, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& f : v) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    f = static_cast<float>(x >> 40) * (2.f / 16777216.f) - 1.f;
  }
  return v;
}

std::vector<std::vector<float>> inputs(const SampleLayout& l, int64_t n) {
  std::vector<std::vector<float>> in;
  for (size_t i = 0; i < l.in.size(); ++i) {
    in.push_back(quick_filled(n * l.in[i], l.seed + i));
    if (static_cast<int>(i) == l.target_input)
      for (float& v : in.back())
        v = std::min<float>(std::floor((v + 1.f) / 2.f * l.classes), l.classes - 1);
  }
  return in;
}

std::string share_name(const Share& s) {
  return "share of " + std::to_string(s.n) + " from sample " + std::to_string(s.first) + ", " +
         (s.shift < 0 ? std::string("in place") : "shifted " + std::to_string(s.shift)) + ", " +
         std::to_string(s.threads) + " thread(s)";
}

// Runs kernel over share s of the batch inputs `in`; returns the share's outputs.
std::vector<std::vector<float>> run_share(const SampleLayout& l, const SampleKernel& kernel,
                                          const std::vector<std::vector<float>>& in,
                                          const Share& s) {
  ThreadCount threads(s.threads);
  std::vector<ShiftedBuffer> in_buf, out_buf;
  std::vector<const float*> ip;
  std::vector<float*> op;
  std::vector<std::vector<float>> store, out(l.out.size());
  for (size_t i = 0; i < l.in.size(); ++i) {
    const float* src = in[i].data() + s.first * l.in[i];
    if (s.shift < 0) {
      ip.push_back(src);
      continue;
    }
    in_buf.emplace_back(s.n * l.in[i], s.shift);
    std::copy(src, src + s.n * l.in[i], in_buf.back().get());
    ip.push_back(in_buf.back().get());
  }
  // In place: outputs inside a batch-sized tensor at the share's rows.
  for (int64_t per : l.out) {
    if (s.shift < 0) {
      store.emplace_back((s.first + s.n) * per, NAN);
      op.push_back(store.back().data() + s.first * per);
    } else {
      out_buf.emplace_back(s.n * per, s.shift);
      op.push_back(out_buf.back().get());
    }
  }
  kernel(ip, op, s.n);
  for (size_t j = 0; j < l.out.size(); ++j) out[j].assign(op[j], op[j] + s.n * l.out[j]);
  return out;
}

}  // namespace

BitDiff bit_diff(const float* a, const float* b, int64_t n) {
  BitDiff d;
  for (int64_t i = 0; i < n; ++i)
    if (std::memcmp(a + i, b + i, sizeof(float)) != 0) {
      ++d.count;
      d.max_abs = std::max(d.max_abs, std::fabs(static_cast<double>(a[i]) - b[i]));
    }
  return d;
}

namespace {

// report(share, output, difference from the whole batch's rows) for every share and output.
void compare_shares(const SampleLayout& l, const SampleKernel& kernel,
                    const std::function<void(const Share&, size_t, const BitDiff&)>& report) {
  const auto in = inputs(l, kInvariantBatch);
  const auto whole = run_share(l, kernel, in, Share{kInvariantBatch, 0, 0, 2});
  for (const Share& s : kShares) {
    const auto got = run_share(l, kernel, in, s);
    for (size_t j = 0; j < l.out.size(); ++j)
      report(s, j, bit_diff(got[j].data(), whole[j].data() + s.first * l.out[j], s.n * l.out[j]));
  }
}

}  // namespace

BitDiff per_sample_difference(const SampleLayout& l, const SampleKernel& kernel) {
  BitDiff worst;
  compare_shares(l, kernel, [&](const Share&, size_t, const BitDiff& d) {
    worst.count += d.count;
    worst.max_abs = std::max(worst.max_abs, d.max_abs);
  });
  return worst;
}

void expect_per_sample_invariant(const SampleLayout& l, const SampleKernel& kernel) {
  compare_shares(l, kernel, [&](const Share& s, size_t j, const BitDiff& d) {
    EXPECT_EQ(d.count, 0) << "output " << j << ", " << share_name(s) << ": " << d.count
                          << " floats differ from the whole batch's, by up to " << d.max_abs;
  });
}

namespace {

// The chunk's gradient with the chunk at placement p (of chunk inputs `chunk`).
std::vector<float> run_placed(const std::vector<int64_t>& per, int64_t grad_count,
                              const ChunkKernel& kernel,
                              const std::vector<std::vector<float>>& chunk, const Placement& p) {
  ThreadCount threads(p.threads);
  std::vector<std::vector<float>> batch;
  std::vector<ShiftedBuffer> bufs;
  std::vector<const float*> ip;
  for (size_t i = 0; i < per.size(); ++i) {
    batch.emplace_back(p.batch * per[i], 0.25f);  // the other samples: any values
    std::copy(chunk[i].begin(), chunk[i].end(), batch.back().begin() + p.at * per[i]);
    const float* src = batch.back().data() + p.at * per[i];
    if (p.shift < 0) {
      ip.push_back(src);
      continue;
    }
    bufs.emplace_back(kInvariantChunk * per[i], p.shift);
    std::copy(src, src + kInvariantChunk * per[i], bufs.back().get());
    ip.push_back(bufs.back().get());
  }
  std::vector<float> grad(static_cast<size_t>(grad_count), NAN);
  kernel(ip, grad.data(), kInvariantChunk);
  return grad;
}

std::vector<std::vector<float>> chunk_inputs(const std::vector<int64_t>& per) {
  std::vector<std::vector<float>> chunk;
  for (size_t i = 0; i < per.size(); ++i)
    chunk.push_back(quick_filled(kInvariantChunk * per[i], 1 + i));
  return chunk;
}

}  // namespace

void expect_chunk_invariant(const std::vector<int64_t>& per, int64_t grad_count,
                            const ChunkKernel& kernel) {
  const auto chunk = chunk_inputs(per);
  ThreadCount threads(1);
  std::vector<const float*> ip;
  for (const auto& c : chunk) ip.push_back(c.data());
  std::vector<float> alone(static_cast<size_t>(grad_count), NAN);
  kernel(ip, alone.data(), kInvariantChunk);
  for (const Placement& p : kPlacements) {
    const auto got = run_placed(per, grad_count, kernel, chunk, p);
    const BitDiff d = bit_diff(got.data(), alone.data(), grad_count);
    EXPECT_EQ(d.count, 0) << "chunk at sample " << p.at << " of " << p.batch << ", "
                          << (p.shift < 0 ? "in place" : "shifted") << ", " << p.threads
                          << " thread(s): " << d.count << " floats differ, by up to " << d.max_abs;
  }
}

BitDiff blocked_chunk_difference(const std::vector<int64_t>& per, int64_t grad_count,
                                 const ChunkKernel& kernel, const ChunkKernel& add_kernel) {
  const auto chunk = chunk_inputs(per);
  ThreadCount threads(1);
  std::vector<const float*> first, second;
  for (size_t i = 0; i < per.size(); ++i) {
    first.push_back(chunk[i].data());
    second.push_back(chunk[i].data() + kInvariantChunk / 2 * per[i]);
  }
  std::vector<float> one(static_cast<size_t>(grad_count)), two(one.size());
  kernel(first, one.data(), kInvariantChunk);
  kernel(first, two.data(), kInvariantChunk / 2);
  add_kernel(second, two.data(), kInvariantChunk / 2);
  return bit_diff(one.data(), two.data(), grad_count);
}

}  // namespace engine::testing
