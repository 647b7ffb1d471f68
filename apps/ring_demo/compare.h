// apps/ring_demo/compare.h: `ring_demo --compare`: the alpha-beta cost model of three ways to
// all-reduce a buffer - the ring, reduce-to-root-then-broadcast, and a naive all-to-all - for
// W = 2..16, with the formula for each, so the reason for the ring shows in numbers.
#pragma once
#include <string>

namespace engine::ring_demo {

struct CompareModel {
  double bytes = 100e6;     // B: the buffer every rank holds
  double alpha_s = 50e-6;   // latency of one message, seconds
  double beta_Bps = 1.5e9;  // link bandwidth, bytes per second
  int min_world = 2, max_world = 16;
};

// Modelled seconds and bytes sent per rank (the busiest rank for reduce+broadcast).
double ring_seconds(const CompareModel& m, int world);
double tree_seconds(const CompareModel& m, int world);  // reduce to root, then broadcast
double all_to_all_seconds(const CompareModel& m, int world);

// The table with its formulas and assumptions, one row per world size.
std::string compare_table(const CompareModel& m);

}  // namespace engine::ring_demo
