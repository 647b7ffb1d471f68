// comm/ring.cpp: see ring.h.
#include "comm/ring.h"

#include <algorithm>

#include "core/error.h"

namespace engine::comm {

const char* ring_phase_name(RingPhase p) {
  return p == RingPhase::ReduceScatter ? "reduce-scatter" : "all-gather";
}

RingSchedule::RingSchedule(int rank, int world, size_t count, int shift)
    : rank_(rank), world_(world), count_(count), shift_(shift) {
  ENGINE_CHECK(world >= 1 && rank >= 0 && rank < world, "ring: bad rank ", rank, " of ", world);
}

int RingSchedule::send_chunk(RingPhase p, int s) const {
  return p == RingPhase::ReduceScatter ? mod(rank_ - s + shift_) : mod(rank_ + 1 - s + shift_);
}

int RingSchedule::recv_chunk(RingPhase p, int s) const {
  return p == RingPhase::ReduceScatter ? mod(rank_ - s - 1 + shift_) : mod(rank_ - s + shift_);
}

Range RingSchedule::chunk(int c) const {
  const size_t base = count_ / world_, extra = count_ % world_;
  const size_t uc = static_cast<size_t>(c);
  const size_t begin = uc * base + std::min(uc, extra);
  return {begin, begin + base + (uc < extra ? 1 : 0)};
}

size_t RingSchedule::segments(size_t segment_count) const {
  segment_count = std::max<size_t>(segment_count, 1);
  return std::max<size_t>(1, (max_chunk() + segment_count - 1) / segment_count);
}

Range RingSchedule::segment(int c, size_t k, size_t segment_count) const {
  Range ch = chunk(c);
  size_t b = std::min(ch.end, ch.begin + k * segment_count);
  size_t e = std::min(ch.end, b + segment_count);
  return {b, e};
}

}  // namespace engine::comm
