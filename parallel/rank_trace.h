// parallel/rank_trace.h: one trace file for a job: each rank writes its events (core/trace.h),
// rank 0 merges them into one file with a track per rank.
#pragma once
#include <string>

#include "comm/communicator.h"

namespace engine::parallel {

// Every rank calls it (comm: null for one process); tracing is off afterwards.
void write_rank_trace(const std::string& path, comm::Communicator* comm);

}  // namespace engine::parallel
