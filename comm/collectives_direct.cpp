// comm/collectives_direct.cpp: barrier, the fingerprint agreement, gather and scatter.
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
#include <cstring>
#include <vector>

#include "comm/communicator.h"
#include "core/error.h"

namespace engine::comm {

void Communicator::agree(const Fingerprint& fp) {
  const int W = size();
  Transport& tp = *transport_;
  const Deadline dl = deadline();
  // Steps above any data message index, so a desynchronised schedule is caught too.
  uint32_t step = 0xFFFF0000u;
  for (int d = 1; d < W; d *= 2, ++step) {
    FrameHeader h = FrameHeader::data(fp, step, 0);
    auto s = tp.isend((rank() + d) % W, Stream::Coll, h, nullptr);
    auto r = tp.irecv((rank() - d + W) % W, Stream::Coll, h, nullptr);
    tp.wait(r, dl);
    tp.wait(s, dl);
  }
}

void Communicator::do_barrier() {
  Fingerprint fp = begin(CollOp::Barrier, 0, DType::F32, ReduceOp::SUM, -1);
  agree(fp);
}

void Communicator::do_gather(const void* in, void* out, size_t count, DType dt, int root) {
  Fingerprint fp = begin(CollOp::Gather, count, dt, ReduceOp::SUM, root);
  const size_t nbytes = count * dtype_size(dt);
  if (rank() == root && nbytes) {
    auto* o = static_cast<std::byte*>(out) + rank() * nbytes;
    if (o != in) std::memcpy(o, in, nbytes);
  }
  if (size() == 1) return;
  agree(fp);
  Transport& tp = *transport_;
  const Deadline dl = deadline();
  FrameHeader h = FrameHeader::data(fp, 0, nbytes);
  if (rank() != root) {
    tp.wait(tp.isend(root, Stream::Coll, h, in), dl);
    return;
  }
  std::vector<RequestPtr> recvs;
  for (int p = 0; p < size(); ++p)
    if (p != root)
      recvs.push_back(tp.irecv(p, Stream::Coll, h, static_cast<std::byte*>(out) + p * nbytes));
  for (auto& r : recvs) tp.wait(r, dl);
}

void Communicator::do_scatter(const void* in, void* out, size_t count, DType dt, int root) {
  Fingerprint fp = begin(CollOp::Scatter, count, dt, ReduceOp::SUM, root);
  const size_t nbytes = count * dtype_size(dt);
  if (rank() == root && nbytes) {
    auto* i = static_cast<const std::byte*>(in) + rank() * nbytes;
    if (i != out) std::memcpy(out, i, nbytes);
  }
  if (size() == 1) return;
  agree(fp);
  Transport& tp = *transport_;
  const Deadline dl = deadline();
  FrameHeader h = FrameHeader::data(fp, 0, nbytes);
  if (rank() != root) {
    tp.wait(tp.irecv(root, Stream::Coll, h, out), dl);
    return;
  }
  std::vector<RequestPtr> sends;
  for (int p = 0; p < size(); ++p)
    if (p != root)
      sends.push_back(tp.isend(p, Stream::Coll, h, static_cast<const std::byte*>(in) + p * nbytes));
  for (auto& s : sends) tp.wait(s, dl);
}

}  // namespace engine::comm
