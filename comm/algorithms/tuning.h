// comm/algorithms/tuning.h: which algorithm runs a collective (as NCCL's graph/tuning.cc): the
// choice a user makes (CommOptions::algo), and for `auto` a table of crossovers by world
// size and message size, measured on our machines (tuning.cpp says how).
//
//   all_reduce   ring (ring.h), rd (recursive doubling, recursive_doubling.h), rh (Rabenseifner's
//                halving-doubling, halving_doubling.h), tree (binomial reduce to rank 0, then
//                binomial broadcast, tree.h)
//   broadcast,   tree (binomial, tree.h); ring picks the chains in ring order (chain.h); rd and
//   reduce       rh have no broadcast or reduce and leave the choice to auto
//   the others   one algorithm each (ring.h, direct.h), whatever the choice
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace engine::comm {

enum class Algo : uint8_t { Auto, Ring, Rd, Rh, Tree };

// "auto", "ring", "rd", "rh", "tree".
const char* algo_name(Algo a);
// Parses algo_name's names; throws engine::Error naming the choices otherwise.
Algo algo_from_name(const std::string& s);

// The algorithm `auto` runs for an all_reduce of nbytes per rank over world ranks: Ring, Rd or Rh.
Algo auto_all_reduce(size_t nbytes, int world);
// The algorithm `auto` runs for a broadcast or reduce: Tree or Ring (the chain).
Algo auto_rooted(size_t nbytes, int world);

}  // namespace engine::comm
