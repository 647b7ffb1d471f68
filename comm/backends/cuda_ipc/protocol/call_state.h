// comm/backends/cuda_ipc/protocol/call_state.h: what the host keeps between the calls of the
// stream-ordered IPC ring (the call's sequence number, LL's rounds, each channel's FIFO positions)
// and how one call's CallArgs are made from it. All ranks advance the same way for the same calls,
// so no counter is ever exchanged or reset. Host code (the ring in proto_ring.cu, the CPU tests).
#pragma once
#include <cstdint>

#include "comm/backends/cuda_ipc/protocol/layout.h"

namespace engine::comm::ipc::proto {

struct CallState {
  uint32_t seq = 0;       // the last call's
  uint64_t ll_round = 0;  // LL rounds so far
  uint64_t sent[kMaxChannels] = {};
  uint64_t taken[kMaxChannels] = {};
};

// The arguments of the next call (protocol p, Ll or Simple), and the state advanced past it.
// regions, layout, err, timeout_ns and g are the caller's (already in `a`).
inline void next_call(CallState& st, CallArgs& a, Protocol p, float* data, int64_t count,
                      uint32_t op, uint32_t dtype, bool avg) {
  a.data = data;
  a.count = count;
  a.op = op;
  a.avg = avg;
  a.seq = ++st.seq;
  a.words = call_words(a.seq, static_cast<uint64_t>(count), op, dtype);
  a.ll_round0 = st.ll_round;
  for (int c = 0; c < kMaxChannels; ++c) {
    a.sent0[c] = st.sent[c];
    a.taken0[c] = st.taken[c];
  }
  if (p == Protocol::Ll) {
    st.ll_round += static_cast<uint64_t>(ll_rounds(count, a.g.ll_lines));
    return;
  }
  for (int c = 0; c < a.g.channels; ++c) {
    const SlotCounts n = channel_slots(count, a.rank, a.g, c);
    st.sent[c] += n.sent;
    st.taken[c] += n.taken;
  }
}

}  // namespace engine::comm::ipc::proto
