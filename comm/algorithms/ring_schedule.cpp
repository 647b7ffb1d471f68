// comm/algorithms/ring_schedule.cpp: see ring_schedule.h.
#include "comm/algorithms/ring_schedule.h"

#include "core/error.h"

namespace engine::comm {

const char* ring_phase_name(RingPhase p) {
  return p == RingPhase::ReduceScatter ? "reduce-scatter" : "all-gather";
}

void check_ring_args(int rank, int world, size_t align) {
  ENGINE_CHECK(world >= 1 && rank >= 0 && rank < world, "ring: bad rank ", rank, " of ", world);
  ENGINE_CHECK(align >= 1, "ring: alignment must be at least 1 element, got ", align);
}

}  // namespace engine::comm
