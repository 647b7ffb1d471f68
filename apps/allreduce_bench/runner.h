// apps/allreduce_bench/runner.h: owns one rank's benchmark loop: per collective and size, a
// correctness pass, warm-up calls, then timed calls; times and wrong counts combined over ranks.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "apps/allreduce_bench/config.h"
#include "comm/communicator.h"

namespace engine::allreduce_bench {

struct Row {
  CollOp collective = CollOp::AllReduce;
  int world = 1;
  std::string transport;
  int64_t bytes = 0, count = 0, iters = 0;
  double time_us = 0, algbw_gbs = 0, busbw_gbs = 0;
  int64_t wrong = -1;  // summed over ranks; -1 when not checked
};

// Runs every collective and size of cfg on this rank (all ranks call it together). on_row runs
// on rank 0 for each row as it completes; on_table before each collective's rows. comm lines the
// ranks up and combines times and wrong counts; backend says where the buffers live and what
// moves them (host buffers through comm by default).
void run_rank(comm::Communicator& comm, const Config& cfg,
              const std::function<void(CollOp)>& on_table,
              const std::function<void(const Row&)>& on_row, const Backend& backend = {});

}  // namespace engine::allreduce_bench
