// comm/backends/cuda_ipc/protocol/layout.h: what the stream-ordered IPC ring's protocols share
// (docs/ring.md, "The protocols"): the geometry of a rank's region, its byte layout, the call word
// that every rank announces before it moves data, the LL line, the channels' split of the buffer,
// the error record the host reads, and the per-call arguments. Host and device code (ENGINE_HD),
// pure: the CPU tests (threads as ranks) and the CUDA kernels use the same functions.
//
// A rank's region (one allocation: cudaMalloc + IPC on the GPU, plain memory on the CPU):
//   hello[2][kMaxRanks][2]        call words written by every peer q into [seq & 1][q]
//   fault[16]                     [0]: the first failure any rank saw (seq, reporter, culprit + 1),
//                                 broadcast by peers; [8]: this rank's claim on its error record
//   waiting[kMaxChannels][16]     what channel c of this rank waits for now (seq << 32 | peer + 1)
//   head[kMaxChannels][16]        slots prev has posted into this rank's FIFO of channel c
//   tail[kMaxChannels][16]        slots next has consumed of its FIFO of channel c (the credit)
//   ll[2][W][ll_lines]            LL lines written by rank q into [round & 1][q]
//   fifo[channels][slots][slot_elems]  Simple's slots, written by prev
// Counters (head, tail) only grow, across calls: nothing is ever reset. Counters sit 128 bytes
// apart so that two writers never share a line.
#pragma once
#include <cstddef>
#include <cstdint>

#include "comm/algorithms/ring_schedule.h"
#include "core/hd.h"

namespace engine::comm::ipc::proto {

constexpr int kMaxRanks = 64;     // regions mapped per rank (the ring's W)
constexpr int kMaxChannels = 32;  // Simple's channels (GPU blocks)
constexpr int kMaxLlRanks = 8;    // LL is one hop to every peer: W <= 8
constexpr int kStride = 16;       // uint64 words between two counters: 128 bytes
constexpr int kAlignElems = 4;    // channel parts and ring chunks start at multiples of 4 floats

// The protocol of a call. Events: the event-chained ring for time-sliced ranks
// (chain/event_chain.cu), not a kernel here.
enum class Protocol : uint8_t { Auto, Ll, Simple, Events };

struct Geometry {
  int world = 1;
  int channels = 1;              // Simple: independent rings over parts of the buffer
  int slots = 4;                 // Simple: FIFO depth per channel
  int64_t slot_elems = 4096;     // Simple: floats per slot, a multiple of 4
  int64_t ll_lines = 4096;       // LL: floats per round (one 8-byte line each) per peer
  int64_t ll_max_bytes = 65536;  // auto: LL up to this many bytes (docs/ring.md)
};

// Byte offsets of the parts of a region.
struct Layout {
  size_t hello, fault, waiting, head, tail, ll, fifo, bytes;
};

ENGINE_HD size_t align_up(size_t n, size_t a) {
  return (n + a - 1) / a * a;
}

ENGINE_HD Layout region_layout(const Geometry& g) {
  Layout l{};
  size_t at = 0;
  l.hello = at;
  at += sizeof(uint64_t) * 2 * kMaxRanks * 2;
  l.fault = at;
  at += sizeof(uint64_t) * kStride;
  l.waiting = at;
  at += sizeof(uint64_t) * kMaxChannels * kStride;
  l.head = at;
  at += sizeof(uint64_t) * kMaxChannels * kStride;
  l.tail = at;
  at += sizeof(uint64_t) * kMaxChannels * kStride;
  l.ll = at;
  at += align_up(
      sizeof(uint64_t) * 2 * static_cast<size_t>(g.world) * static_cast<size_t>(g.ll_lines), 256);
  l.fifo = at;
  at += sizeof(float) * static_cast<size_t>(g.channels) * static_cast<size_t>(g.slots) *
        static_cast<size_t>(g.slot_elems);
  l.bytes = align_up(at, 256);
  return l;
}

// Typed views of one region.
struct Region {
  uint64_t* hello;    // [2][kMaxRanks][2]
  uint64_t* fault;    // [kStride]
  uint64_t* waiting;  // [kMaxChannels * kStride]
  uint64_t* head;     // [kMaxChannels * kStride]
  uint64_t* tail;     // [kMaxChannels * kStride]
  uint64_t* ll;       // [2][W][ll_lines]
  float* fifo;        // [channels][slots][slot_elems]
};

ENGINE_HD Region region_at(char* base, const Layout& l) {
  Region r;
  r.hello = reinterpret_cast<uint64_t*>(base + l.hello);
  r.fault = reinterpret_cast<uint64_t*>(base + l.fault);
  r.waiting = reinterpret_cast<uint64_t*>(base + l.waiting);
  r.head = reinterpret_cast<uint64_t*>(base + l.head);
  r.tail = reinterpret_cast<uint64_t*>(base + l.tail);
  r.ll = reinterpret_cast<uint64_t*>(base + l.ll);
  r.fifo = reinterpret_cast<float*>(base + l.fifo);
  return r;
}

// ---- The call word: (sequence, count, op, dtype) ------------------------------------------------
// word0 = seq (32 bits) << 32 | op (4) << 28 | dtype (4) << 24 | a 24-bit hash of count;
// word1 = count. A peer whose words differ from this rank's calls something else.
struct CallWords {
  uint64_t w0, w1;
};

ENGINE_HD CallWords call_words(uint32_t seq, uint64_t count, uint32_t op, uint32_t dtype) {
  uint64_t h = count * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  const uint64_t low = (static_cast<uint64_t>(op & 15u) << 28) |
                       (static_cast<uint64_t>(dtype & 15u) << 24) | ((h >> 40) & 0xFFFFFFu);
  return {(static_cast<uint64_t>(seq) << 32) | low, count};
}
ENGINE_HD uint32_t word_seq(uint64_t w0) {
  return static_cast<uint32_t>(w0 >> 32);
}
ENGINE_HD uint32_t word_op(uint64_t w0) {
  return static_cast<uint32_t>(w0 >> 28) & 15u;
}
ENGINE_HD uint32_t word_dtype(uint64_t w0) {
  return static_cast<uint32_t>(w0 >> 24) & 15u;
}
// a is at or past b (32-bit sequence numbers that may wrap).
ENGINE_HD bool seq_at_least(uint32_t a, uint32_t b) {
  return static_cast<int32_t>(a - b) >= 0;
}

// ---- LL: one 8-byte store carries 4 bytes of data and the 4-byte flag ---------------------------
ENGINE_HD uint64_t ll_pack(uint32_t data_bits, uint32_t flag) {
  return (static_cast<uint64_t>(flag) << 32) | data_bits;
}
ENGINE_HD uint32_t ll_flag(uint64_t line) {
  return static_cast<uint32_t>(line >> 32);
}
ENGINE_HD uint32_t ll_data(uint64_t line) {
  return static_cast<uint32_t>(line);
}

// ---- Simple: channel c's part of the buffer, and its slots per call -----------------------------
// Four floats that move as one 16-byte access (a float4 on the GPU: gpu_mem_ops.cuh).
struct Vec4 {
  float v[4];
};

ENGINE_HD Range channel_part(int64_t count, int channels, int c) {
  return RingSchedule(0, channels, static_cast<size_t>(count), 0, kAlignElems).chunk(c);
}

// Pieces (slots) that a span of n elements takes.
ENGINE_HD int64_t slots_for(int64_t n, int64_t slot_elems) {
  return (n + slot_elems - 1) / slot_elems;
}

// The ring's units over a channel's part:
//   Send u=0, Reduce u=1..W-2, Final u=W-1, Copy u=W..2W-3, LastCopy u=2W-2.
enum UnitKind : int { Send, Reduce, Final, Copy, LastCopy };
struct Unit {
  int kind;
  int chunk;
};

ENGINE_HD Unit unit_of(const RingSchedule& s, int u) {
  const int W = s.world(), last = 2 * W - 2;
  const int kind = u == 0       ? UnitKind::Send
                   : u < W - 1  ? UnitKind::Reduce
                   : u == W - 1 ? UnitKind::Final
                   : u < last   ? UnitKind::Copy
                                : UnitKind::LastCopy;
  if (u < last) return {kind, s.send_chunk(s.phase_of(u), s.phase_step(u))};
  return {kind, s.recv_chunk(s.phase_of(last - 1), s.phase_step(last - 1))};
}

// One element of a unit: `in` from what prev wrote (a slot), `local` from the user's buffer.
template <int kKind, class Op>
ENGINE_HD float unit_elem(Op op, float in, float local, bool avg, float world) {
  if constexpr (kKind == UnitKind::Send) {
    return local;
  } else if constexpr (kKind == UnitKind::Reduce) {
    return op(in, local);
  } else if constexpr (kKind == UnitKind::Final) {
    const float v = op(in, local);
    return avg ? v / world : v;
  } else {
    return in;
  }
}

// Slots channel c of `rank` posts to next and takes from prev in one call of `count` elements.
struct SlotCounts {
  uint64_t sent, taken;
};
ENGINE_HD SlotCounts channel_slots(int64_t count, int rank, const Geometry& g, int c) {
  const Range part = channel_part(count, g.channels, c);
  const RingSchedule s(rank, g.world, part.size(), 0, kAlignElems);
  SlotCounts n{0, 0};
  for (int u = 0; u < 2 * g.world - 1; ++u) {
    const Unit unit = unit_of(s, u);
    const auto k = static_cast<uint64_t>(
        slots_for(static_cast<int64_t>(s.chunk(unit.chunk).size()), g.slot_elems));
    if (unit.kind != UnitKind::LastCopy) n.sent += k;
    if (unit.kind != UnitKind::Send) n.taken += k;
  }
  return n;
}

// LL rounds of a call (at least one: the call word's round trip is a round too).
ENGINE_HD int64_t ll_rounds(int64_t count, int64_t ll_lines) {
  const int64_t n = (count + ll_lines - 1) / ll_lines;
  return n > 0 ? n : 1;
}

// What `requested` runs for a call of `bytes` bytes: Auto is LL up to g.ll_max_bytes (where W <= 8,
// LL being one hop to every peer), Simple above. Ll where W > 8 is refused by the host (the
// constructor), never here.
ENGINE_HD Protocol choose_protocol(Protocol requested, int64_t bytes, const Geometry& g) {
  if (requested != Protocol::Auto) return requested;
  return g.world <= kMaxLlRanks && bytes <= g.ll_max_bytes ? Protocol::Ll : Protocol::Simple;
}

// What a ring requesting `requested` runs at all, decided once at construction from its mode:
// where ranks share a GPU without MPS ("time-sliced") a spinning kernel holds the GPU for its whole
// time slice, so Auto runs the event-chained ring there (docs/ring.md). An explicit protocol is
// kept.
ENGINE_HD Protocol ring_protocol(Protocol requested, bool time_sliced) {
  return requested == Protocol::Auto && time_sliced ? Protocol::Events : requested;
}

// What a call of `bytes` bytes runs on a ring in that mode (ring_protocol, then choose_protocol).
ENGINE_HD Protocol protocol_ran(Protocol requested, bool time_sliced, int64_t bytes,
                                const Geometry& g) {
  return choose_protocol(ring_protocol(requested, time_sliced), bytes, g);
}

// ---- The error record (host-mapped on the GPU) --------------------------------------------------
enum ErrState : uint32_t { kClear = 0, kWriting = 1, kSet = 2 };
enum ErrKind : uint32_t { kTimeout = 1, kMismatch = 2, kAborted = 3, kPeerFailed = 4 };
// What a wait waited for.
enum WaitWhat : int32_t { kHello = -1, kLlData = -2, kSlotData = -3, kSlotCredit = -4 };

struct ErrorRecord {
  uint32_t state;     // ErrState: kSet last, after the fields
  uint32_t kind;      // ErrKind
  int32_t peer;       // the rank named (the culprit)
  int32_t neighbour;  // the rank whose store was waited for (kPeerFailed: the reporting rank)
  int32_t channel;    // Simple's channel, LL: 0
  int32_t what;       // WaitWhat
  int32_t unit;       // Simple's ring unit, or -1
  uint64_t seq;       // this rank's call
  uint64_t seen;      // the counter or word seen (kMismatch: the peer's word0)
  uint64_t wanted;    // what was waited for (kMismatch: this rank's word0)
  uint64_t seen1;     // kMismatch: the peer's count
  uint64_t waited_ns;
  uint32_t abort;               // set by the host: every wait gives up at its next check
  uint64_t done[kMaxChannels];  // progress: the last call each channel (LL: [0]) finished
};

// One call of one rank. regions[q]: rank q's region as this rank maps it (its own included).
struct CallArgs {
  float* data;  // count floats, in place
  int64_t count;
  int rank;
  uint32_t op;  // kernels::ReduceOp as an integer
  bool avg;     // divide the final sums by W
  uint32_t seq;
  CallWords words;
  uint64_t timeout_ns;  // each wait
  Geometry g;
  Layout layout;
  char* regions[kMaxRanks];
  ErrorRecord* err;
  uint64_t ll_round0;             // LL: the rounds before this call (all ranks agree)
  uint64_t sent0[kMaxChannels];   // Simple: slots channel c posted before this call
  uint64_t taken0[kMaxChannels];  // Simple: slots channel c took before this call
};

}  // namespace engine::comm::ipc::proto
