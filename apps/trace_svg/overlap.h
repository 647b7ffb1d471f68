// apps/trace_svg/overlap.h: how much of each rank's allreduce time runs while its backward pass
// runs: the number that says whether gradient communication is hidden behind computation.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "apps/trace_svg/timeline.h"

namespace engine::trace_svg {

// Inside one window, per rank. Times are lengths of unions of intervals (parallel buckets on
// several threads count once).
struct RankOverlap {
  int64_t rank = 0;
  int allreduces = 0;        // "allreduce" / "reduce+broadcast" events of category "comm"
  double allreduce_us = 0;   // time with at least one of them running
  double backward_us = 0;    // time inside "backward" events (category "backward")
  double overlapped_us = 0;  // time with both
  double wait_us = 0;        // "allreduce wait": the main thread blocked on buckets
};

std::vector<RankOverlap> allreduce_overlap(const Timeline& t, const Window& w);

// "rank 0: 3 allreduces busy 4.21 ms, 3.10 ms of it (74%) during backward; waited 1.02 ms"
std::string describe(const RankOverlap& o);

}  // namespace engine::trace_svg
