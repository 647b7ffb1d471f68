// comm/algorithms/algorithms.h: the collective algorithms as free functions over a transport and
// the call's context (comm/algorithms/context.h), as gloo's are functions over a context. The
// Communicator (comm/communicator.h) numbers the calls, makes each one's context and runs them in
// order; the host backend and the CUDA staged backend (comm/backends/backend.h) drive them on host
// buffers.
//
// Every function reads the call (count, dtype, reduce op, root) from c.fp, the fingerprint every
// peer checks, and moves host memory only. Sizes: c.fp.count elements of c.fp.dtype per rank.
//   ring   (ring.h)    all_reduce, all_gather, reduce_scatter, on comm/algorithms/ring_schedule.h
//   chain  (chain.h)   broadcast, reduce: pipelined chains in ring order
//   direct (direct.h)  agreement (dissemination), barrier, gather, scatter
//   rd     (recursive_doubling.h)  all_reduce by recursive doubling (small messages)
//   rh     (halving_doubling.h)    all_reduce by Rabenseifner's halving-doubling
//   tree   (tree.h)    broadcast, reduce and all_reduce on binomial trees (small messages)
//   chunk_tree (chunk_tree.h)  the sum over core/chunk_tree.h's fixed tree (called directly by
//                      Communicator::chunk_tree_all_reduce: its input is a list of nodes)
// Which one runs: c.algo and, for auto, the crossovers of tuning.h.
#pragma once
#include "comm/algorithms/chain.h"
#include "comm/algorithms/chunk_tree.h"
#include "comm/algorithms/context.h"
#include "comm/algorithms/direct.h"
#include "comm/algorithms/halving_doubling.h"
#include "comm/algorithms/recursive_doubling.h"
#include "comm/algorithms/ring.h"
#include "comm/algorithms/tree.h"
#include "comm/algorithms/tuning.h"

namespace engine::comm {

// The algorithm of c.fp.op (comm/communicator.h's choice for each collective): in and out as
// ring_*, chain_* and direct_*; the in-place ones (all_reduce, broadcast, reduce) work on out,
// barrier on neither.
void run_algorithm(const CollContext& c, const void* in, void* out);

// The algorithm run_algorithm runs for an all_reduce (Ring, Rd, Rh or Tree) or a broadcast or
// reduce (Tree, or Ring for the chain) under c.algo: the choice, or auto's.
Algo chosen_algo(const CollContext& c);

}  // namespace engine::comm
