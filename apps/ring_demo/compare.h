// apps/ring_demo/compare.h: `ring_demo --compare`: the alpha-beta cost model of three ways to
// all-reduce a buffer - the ring, reduce-to-root-then-broadcast, and a naive all-to-all - for
// W = 2..16, with the formula for each, so the reason for the ring shows in numbers; then every
// all_reduce algorithm of comm/ measured beside its own model (where each wins).
#pragma once
#include <string>

#include "comm/algorithms/tuning.h"

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

// Modelled seconds of one all_reduce of `bytes` per rank by algorithm a over W ranks
// (compare_run.cpp): its rounds times alpha plus the bytes its busiest rank sends over beta.
double algo_model_seconds(comm::Algo a, int W, double bytes, double alpha_s, double beta_Bps);
// The real all_reduce algorithms timed at W = 2, 4, 8 and 8 B, 64 KiB, 1 MiB beside their models
// with alpha and beta fitted on this machine, the fastest of each row, and where each wins
// (compare_run.cpp). Throws engine::Error when a run fails.
std::string measured_compare();

}  // namespace engine::ring_demo
