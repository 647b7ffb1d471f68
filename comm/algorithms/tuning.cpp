// comm/algorithms/tuning.cpp: the names of the algorithms and `auto`'s crossovers.
//
// How the table was measured: allreduce_bench --algo all, shared memory, on one of our 2-core
// AMD EPYC (Zen 4) machines, float32 sum, sizes 8 B .. 64 MiB by factors of 2, W = 2..8 ranks
// (W > 2 oversubscribes the 2 cores, as our CI and tests do):
//   build/apps/allreduce_bench --nproc W --transport shm --algo all --min-bytes 8 --max-bytes 64M
// For each W, rd_max is the largest size at which recursive doubling was fastest, rh_max the
// largest at which Rabenseifner's was at least as fast as the ring; the ring above. For broadcast
// and reduce the binomial tree against the chain, the same way (tree_max).
#include "comm/algorithms/tuning.h"

#include "core/error.h"

namespace engine::comm {

namespace {

struct Crossover {
  int max_world;    // rows apply to W <= max_world, first match
  size_t rd_max;    // all_reduce: recursive doubling up to here (bytes per rank)
  size_t rh_max;    // all_reduce: Rabenseifner's up to here, the ring above
  size_t tree_max;  // broadcast, reduce: the binomial tree up to here, the chain above
};

constexpr Crossover kTable[] = {
    {2, 64 << 10, 0, 64 << 10},
    {4, 32 << 10, 0, 32 << 10},
    {1 << 30, 16 << 10, 0, 16 << 10},
};

const Crossover& row(int world) {
  for (const Crossover& c : kTable)
    if (world <= c.max_world) return c;
  return kTable[std::size(kTable) - 1];
}

constexpr const char* kNames[] = {"auto", "ring", "rd", "rh", "tree"};

}  // namespace

const char* algo_name(Algo a) {
  const auto i = static_cast<size_t>(a);
  return i < std::size(kNames) ? kNames[i] : "?";
}

Algo algo_from_name(const std::string& s) {
  for (size_t i = 0; i < std::size(kNames); ++i)
    if (s == kNames[i]) return static_cast<Algo>(i);
  ENGINE_FAIL("unknown algorithm '", s, "' (expected auto, ring, rd, rh or tree)");
}

Algo auto_all_reduce(size_t nbytes, int world) {
  const Crossover& c = row(world);
  if (nbytes <= c.rd_max) return Algo::Rd;
  if (nbytes <= c.rh_max) return Algo::Rh;
  return Algo::Ring;
}

Algo auto_rooted(size_t nbytes, int world) {
  return nbytes <= row(world).tree_max ? Algo::Tree : Algo::Ring;
}

}  // namespace engine::comm
