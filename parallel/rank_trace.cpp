// parallel/rank_trace.cpp: see rank_trace.h.
#include "parallel/rank_trace.h"

#include <cstdio>
#include <vector>

#include "core/trace.h"

namespace engine::parallel {

void write_rank_trace(const std::string& path, comm::Communicator* comm) {
  trace::disable();
  if (!comm) return trace::write(path);
  std::string part = path + ".rank" + std::to_string(comm->rank());
  trace::write(part);
  comm->barrier();
  if (comm->rank() != 0) return;
  std::vector<std::string> parts;
  for (int r = 0; r < comm->size(); ++r) parts.push_back(path + ".rank" + std::to_string(r));
  trace::merge_files(parts, path);
  for (auto& p : parts) std::remove(p.c_str());
}

}  // namespace engine::parallel
