// apps/allreduce_bench/runner.h: owns one rank's benchmark loop: per collective and size, a
// correctness pass, warm-up calls, then timed calls; times and wrong counts combined over ranks.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "apps/allreduce_bench/config.h"
#include "comm/communicator.h"

namespace engine::allreduce_bench {

// One placement's measurement: nccl-tests' time, algbw, busbw and #wrong.
struct Timing {
  double time_us = 0, algbw_gbs = 0, busbw_gbs = 0;
  int64_t wrong = -1;  // summed over ranks; -1 when not checked
};

struct Row {
  CollOp collective = CollOp::AllReduce;
  int world = 1;
  std::string transport;
  DType dtype = DType::F32;
  comm::ReduceOp op = comm::ReduceOp::Sum;
  std::string algo;  // what ran: "ring", "rd", "rh", "tree", "chain", "auto:rd", ...
  int64_t bytes = 0, count = 0, iters = 0;
  Timing oop, ip;  // out of place, in place
  // The columns of before the pair, kept: in place for all_reduce, broadcast and reduce (our calls
  // work in place), out of place for all_gather and reduce_scatter.
  const Timing& native() const {
    return collective == CollOp::AllGather || collective == CollOp::ReduceScatter ? oop : ip;
  }
};

// The name of what runs collective c of nbytes per rank under algo (CommOptions::algo) over world
// ranks with our host algorithms: "ring", "rd", "rh", "tree" or "chain"; auto's choice as
// "auto:rd".
std::string algo_label(CollOp c, comm::Algo algo, int64_t nbytes, int world);

// Runs every collective and size of cfg on this rank (all ranks call it together). on_row runs
// on rank 0 for each row as it completes; on_table before each collective's rows. comm lines the
// ranks up and combines times and wrong counts; backend says where the buffers live and what
// moves them (host buffers through comm by default).
void run_rank(comm::Communicator& comm, const Config& cfg,
              const std::function<void(CollOp)>& on_table,
              const std::function<void(const Row&)>& on_row, const Backend& backend = {});

}  // namespace engine::allreduce_bench
