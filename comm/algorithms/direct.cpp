// comm/algorithms/direct.cpp: barrier, the fingerprint agreement, gather and scatter.
//
// barrier / agree: dissemination (Hensgen, Finkel, Manber). In round k = 0, 1, ... while 2^k < W,
// rank r sends to r + 2^k and receives from r - 2^k (mod W). After ceil(log2 W) rounds every rank
// has heard, through a chain of checked messages, from every other rank:
//   W = 5, round 0: 0->1 1->2 2->3 3->4 4->0;  round 1: 0->2 1->3 ...;  round 2: 0->4 1->0 ...
// Each message is an empty frame carrying the fingerprint, so barrier doubles as the agreement
// check of the collectives whose data flow does not already prove it.
//
// gather / scatter: direct. The root posts all W-1 receives (sends) at once and the transport moves
// them concurrently; each non-root rank sends (receives) one message. With W <= 8 ranks per job
// there is nothing for a tree to win. Both first run agree(), for the same reason as broadcast.
#include "comm/algorithms/direct.h"

#include <cstring>
#include <vector>

#include "core/error.h"

namespace engine::comm {

void agree(const CollContext& c) {
  const int W = c.world(), r = c.rank();
  const Deadline dl = c.deadline();
  // Steps above any data message index, so a desynchronised schedule is caught too.
  uint32_t step = 0xFFFF0000u;
  for (int d = 1; d < W; d *= 2, ++step) {
    FrameHeader h = FrameHeader::data(c.fp, step, 0);
    auto s = c.tp.isend((r + d) % W, Lane::Collective, h, nullptr);
    auto rv = c.tp.irecv((r - d + W) % W, Lane::Collective, h, nullptr);
    c.tp.wait(rv, dl);
    c.tp.wait(s, dl);
  }
}

void barrier(const CollContext& c) {
  agree(c);
}

namespace {

// The root's own part moves by memcpy between its `mine` (count elements) and its slot of `all`
// (world * count); the others' parts travel: gather receives them into `all` at the root, scatter
// sends them from it. A non-root rank sends (gather) or receives (scatter) `mine` alone.
void run_direct(const CollContext& c, bool to_root, std::byte* all, std::byte* mine) {
  const int root = c.fp.root, W = c.world();
  const size_t nbytes = c.fp.count * dtype_size(c.fp.dtype);
  if (c.rank() == root && nbytes) {
    std::byte* slot = all + c.rank() * nbytes;
    if (slot != mine) to_root ? std::memcpy(slot, mine, nbytes) : std::memcpy(mine, slot, nbytes);
  }
  if (W == 1) return;
  agree(c);
  Transport& tp = c.tp;
  const Deadline dl = c.deadline();
  FrameHeader h = FrameHeader::data(c.fp, 0, nbytes);
  if (c.rank() != root) {
    tp.wait(to_root ? tp.isend(root, Lane::Collective, h, mine)
                    : tp.irecv(root, Lane::Collective, h, mine),
            dl);
    return;
  }
  std::vector<RequestPtr> reqs;
  for (int p = 0; p < W; ++p)
    if (p != root)
      reqs.push_back(to_root ? tp.irecv(p, Lane::Collective, h, all + p * nbytes)
                             : tp.isend(p, Lane::Collective, h, all + p * nbytes));
  for (auto& q : reqs) tp.wait(q, dl);
}

}  // namespace

void direct_gather(const CollContext& c, const void* in, void* out) {
  run_direct(c, true, static_cast<std::byte*>(out), static_cast<std::byte*>(const_cast<void*>(in)));
}

void direct_scatter(const CollContext& c, const void* in, void* out) {
  run_direct(c, false, static_cast<std::byte*>(const_cast<void*>(in)),
             static_cast<std::byte*>(out));
}

}  // namespace engine::comm
