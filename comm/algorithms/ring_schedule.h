// comm/algorithms/ring_schedule.h: the ring schedule - which chunk each rank sends and receives at
// each step - written once, pure, and shared by the real collectives (comm/algorithms/ring.cpp),
// the CUDA IPC ring's kernel (on the device: everything here is host and device code) and the ring
// demo. Nothing here moves bytes.
//
// THE RING ALLREDUCE, 3 ranks, a buffer of 3 chunks (a, b, c), rank r holding a_r, b_r, c_r.
// Rank r sends to its right neighbour r+1 and receives from its left neighbour r-1 (mod W).
//
// Reduce-scatter, W-1 steps. At step s, rank r sends chunk (r - s) and adds the chunk (r - s - 1)
// that arrives from the left into its own copy:
//
//            rank 0            rank 1            rank 2
//   start    a0  b0  c0        a1  b1  c1        a2  b2  c2
//   step 0   sends a0 -> 1     sends b1 -> 2     sends c2 -> 0
//            c0+c2             a1+a0             b2+b1
//   step 1   sends c02 -> 1    sends a01 -> 2    sends b12 -> 0
//            b0+b12            c1+c02            a2+a01
//   now      b = b012          c = c012          a = a012
//
// After W-1 steps rank r owns the complete sum of chunk (r + 1) mod W.
//
// All-gather, W-1 more steps. At step s, rank r sends chunk (r + 1 - s), the one it finished or
// received last, and stores the chunk (r - s) arriving from the left:
//
//   step 0   sends b012 -> 1   sends c012 -> 2   sends a012 -> 0
//   step 1   sends a012 -> 1   sends b012 -> 2   sends c012 -> 0
//   now      every rank holds a012 b012 c012
//
// Each rank sends 2(W-1)/W of the buffer in all, the bandwidth optimum, and only ever talks to its
// two neighbours. Chunk sizes differ by at most one element: the remainder of count / W goes to
// the first chunks (count = 7, W = 3: 3, 2, 2); with count < W some chunks are empty, and their
// steps still send an empty message, so every step carries the fingerprint.
//
// Pipelining: every chunk is cut into the same number of segments (segment_count elements each,
// the last ones shorter or empty). Segment k of step s+1 is sent as soon as segment k of step s has
// arrived and been reduced, so sends, receives and adds of different segments overlap.
//
// Alignment: with align > 1 (the CUDA IPC kernel's 4, for float4 loads) the buffer is cut into
// blocks of `align` elements and the blocks are spread as above, so that every chunk starts at a
// multiple of align (the last chunk ends at count). align = 1 is the element-wise cut above.
//
// `shift` turns the schedule to serve reduce_scatter and all_gather, whose chunk r belongs to rank
// r: with shift = -1, the reduce-scatter phase leaves rank r owning chunk r, and the all-gather
// phase starts by sending chunk r.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/hd.h"  // ENGINE_HD: the schedule runs inside the CUDA IPC ring's kernel too
#include "io/dtype.h"

namespace engine::comm {

struct Range {
  size_t begin = 0, end = 0;  // elements, [begin, end)
  ENGINE_HD size_t size() const { return end - begin; }
};

enum class RingPhase : uint8_t { ReduceScatter, AllGather };
const char* ring_phase_name(RingPhase p);

// Throws engine::Error unless 0 <= rank < world and align >= 1 (host only).
void check_ring_args(int rank, int world, size_t align);

class RingSchedule {
 public:
  ENGINE_HD RingSchedule(int rank, int world, size_t count, int shift = 0, size_t align = 1)
      : rank_(rank), world_(world), count_(count), shift_(shift), align_(align) {
#if !defined(__CUDA_ARCH__)
    check_ring_args(rank, world, align);
#endif
  }

  ENGINE_HD int rank() const {
    return rank_;
  }
  ENGINE_HD int world() const {
    return world_;
  }
  ENGINE_HD size_t count() const {
    return count_;
  }
  ENGINE_HD int left() const {
    return mod(rank_ - 1);
  }
  ENGINE_HD int right() const {
    return mod(rank_ + 1);
  }
  ENGINE_HD int steps_per_phase() const {
    return world_ - 1;
  }

  // Phase-local step s in [0, W-1).
  ENGINE_HD int send_chunk(RingPhase p, int s) const {
    return p == RingPhase::ReduceScatter ? mod(rank_ - s + shift_) : mod(rank_ + 1 - s + shift_);
  }
  ENGINE_HD int recv_chunk(RingPhase p, int s) const {
    return p == RingPhase::ReduceScatter ? mod(rank_ - s - 1 + shift_) : mod(rank_ - s + shift_);
  }
  // Steps of both phases in a row, g in [0, 2(W-1)): reduce-scatter's, then all-gather's.
  ENGINE_HD RingPhase phase_of(int g) const {
    return g < steps_per_phase() ? RingPhase::ReduceScatter : RingPhase::AllGather;
  }
  ENGINE_HD int phase_step(int g) const {
    return g < steps_per_phase() ? g : g - steps_per_phase();
  }
  // The chunk this rank holds complete after the reduce-scatter phase.
  ENGINE_HD int owned_chunk() const {
    return mod(rank_ + 1 + shift_);
  }

  ENGINE_HD Range chunk(int c) const {
    const size_t blocks = (count_ + align_ - 1) / align_;
    const size_t base = blocks / world_, extra = blocks % world_, uc = static_cast<size_t>(c);
    const size_t begin = (uc * base + (uc < extra ? uc : extra)) * align_;
    const size_t end = begin + (base + (uc < extra ? 1 : 0)) * align_;
    return {clamp(begin), clamp(end)};
  }
  // The largest chunk's size (a multiple of align: with align > 1 it may pass count).
  ENGINE_HD size_t max_chunk() const {
    const size_t blocks = (count_ + align_ - 1) / align_;
    return (blocks / world_ + (blocks % world_ ? 1 : 0)) * align_;
  }
  // Segments per chunk for a segment size in elements (at least 1).
  ENGINE_HD size_t segments(size_t segment_count) const {
    segment_count = segment_count > 0 ? segment_count : 1;
    const size_t n = (max_chunk() + segment_count - 1) / segment_count;
    return n > 0 ? n : 1;
  }
  // Segment k of chunk c; empty past the chunk's end (and so are the chunk's later segments).
  ENGINE_HD Range segment(int c, size_t k, size_t segment_count) const {
    const Range ch = chunk(c);
    const size_t b = ch.begin + k * segment_count < ch.end ? ch.begin + k * segment_count : ch.end;
    return {b, b + segment_count < ch.end ? b + segment_count : ch.end};
  }

 private:
  ENGINE_HD int mod(long v) const {
    return static_cast<int>(((v % world_) + world_) % world_);
  }
  ENGINE_HD size_t clamp(size_t i) const {
    return i < count_ ? i : count_;
  }
  int rank_, world_;
  size_t count_;
  int shift_;
  size_t align_;
};

// What an observer sees after each step of a real ring collective (the ring demo prints it).
struct RingStepInfo {
  int rank = 0, world = 0;
  RingPhase phase = RingPhase::ReduceScatter;
  int step = 0;  // within the phase
  int left = 0, right = 0;
  int send_chunk = 0, recv_chunk = 0;
  Range sent, received;          // element ranges of the buffer
  const void* buffer = nullptr;  // the whole buffer after this step's receive completed
  size_t count = 0;
  DType dtype = DType::F32;
};

// What an observer sees after each round of the other all_reduce, broadcast and reduce algorithms
// (recursive doubling, halving-doubling, binomial trees: comm/algorithms/algorithms.h): at most one
// send and one receive per rank and round (-1: none).
struct AlgoStepInfo {
  int rank = 0, world = 0;
  const char* algo = "";   // "rd", "rh", "tree"
  const char* phase = "";  // "fold", "exchange", "reduce-scatter", "all-gather", "unfold", ...
  int round = 0;           // counts every round of the call from 0
  int send_to = -1, recv_from = -1;
  Range sent, received;          // element ranges of the buffer
  bool reduced = false;          // the receive was combined into the buffer (else copied)
  const void* buffer = nullptr;  // the buffer after this round's receive (rank's working copy)
  size_t count = 0;
  DType dtype = DType::F32;
};

// Called on the rank's own thread, once per step, when all of that step's segments have arrived.
// With several segments per chunk, later steps may already have started (pipelining): use one
// segment per chunk to watch the steps one at a time. on_algo_step: once per round of the other
// algorithms, after the round's send and receive completed.
class RingObserver {
 public:
  virtual ~RingObserver() = default;
  virtual void on_step(const RingStepInfo& info) = 0;
  virtual void on_algo_step(const AlgoStepInfo& info) {}
};

}  // namespace engine::comm
