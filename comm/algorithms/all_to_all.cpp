// comm/algorithms/all_to_all.cpp: all_to_all by direct exchange. Every rank posts its W-1
// receives, then its W-1 sends in the order r+1, r+2, ... (mod W), so that at each moment the
// ranks send to different peers, and the transport moves all of them at once; its own chunk is a
// memcpy. W = 3, rank 0 sends to 1 then 2, rank 1 to 2 then 0, rank 2 to 0 then 1.
#include "comm/algorithms/all_to_all.h"

#include <cstring>
#include <vector>

namespace engine::comm {

namespace {

// Element offsets of the chunks: counts[j] elements each, back to back (W + 1 entries).
std::vector<size_t> offsets(const size_t* counts, size_t each, int W) {
  std::vector<size_t> off(W + 1, 0);
  for (int j = 0; j < W; ++j) off[j + 1] = off[j] + (counts ? counts[j] : each);
  return off;
}

// The header of the message between this rank and `peer` of `count` elements.
FrameHeader pair_header(const CollContext& c, size_t count) {
  Fingerprint f = c.fp;
  f.count = count;
  return FrameHeader::data(f, 0, count * dtype_size(c.fp.dtype));
}

}  // namespace

void direct_all_to_all(const CollContext& c, const void* in, void* out, const size_t* send_counts,
                       const size_t* recv_counts) {
  const int W = c.world(), r = c.rank();
  const size_t es = dtype_size(c.fp.dtype);
  const auto soff = offsets(send_counts, c.fp.count, W);
  const auto roff = offsets(recv_counts, c.fp.count, W);
  const auto* src = static_cast<const std::byte*>(in);
  auto* dst = static_cast<std::byte*>(out);
  const size_t own = soff[r + 1] - soff[r];
  if (own != roff[r + 1] - roff[r])
    throw Error("all_to_all on rank " + std::to_string(r) + ": it sends itself " +
                std::to_string(own) + " elements but expects " +
                std::to_string(roff[r + 1] - roff[r]));
  if (own) std::memcpy(dst + roff[r] * es, src + soff[r] * es, own * es);
  if (W == 1) return;
  Transport& tp = c.tp;
  const Deadline dl = c.deadline();
  std::vector<RequestPtr> reqs;
  reqs.reserve(2 * (W - 1));
  for (int k = 1; k < W; ++k) {
    const int p = (r - k + W) % W;
    const size_t n = roff[p + 1] - roff[p];
    reqs.push_back(tp.irecv(p, Lane::Collective, pair_header(c, n), dst + roff[p] * es));
  }
  for (int k = 1; k < W; ++k) {
    const int p = (r + k) % W;
    const size_t n = soff[p + 1] - soff[p];
    reqs.push_back(tp.isend(p, Lane::Collective, pair_header(c, n), src + soff[p] * es));
  }
  for (auto& q : reqs) tp.wait(q, dl);
}

}  // namespace engine::comm
