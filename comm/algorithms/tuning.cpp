// comm/algorithms/tuning.cpp: the names of the algorithms and `auto`'s crossovers.
//
// How the table was measured (2026-11-27): allreduce_bench sweeping every algorithm over shared
// memory on one of our 2-core AMD EPYC (Zen 4) machines, all_reduce, float32 sum, 8 B .. 32 MiB by
// factors of 4 after 3 warm-up calls, W = 2, 3, 4, 6, 8 (W > 2 oversubscribes the 2 cores, as our
// CI and tests do), each size's faster of the out-of-place and in-place times; and the same for
// broadcast and reduce (W = 4, 8; up to 8 MiB). Other programs shared
// the machine (load average 6-12), so single cells are noisy; the table keeps what held across
// world sizes. all_reduce: recursive doubling was fastest up to 512 B at every W (2-3x the ring at
// 8 B) and at W = 2 up to 128 KiB (one exchange of the whole buffer: the ring's bytes in one step
// instead of two); Rabenseifner's beat the ring from 2 KiB to 32 KiB at W = 4, 6, 8 (1.3-2.6x) and
// lost or tied from 128 KiB up, where the ring's pipelined segments win. Broadcast and reduce: the
// binomial tree beat the chain in most cells up to 32 KiB, the chain most cells from 2 MiB up.
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
    {2, 128 << 10, 128 << 10, 32 << 10},
    {1 << 30, 1 << 10, 32 << 10, 32 << 10},
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
