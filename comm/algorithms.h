// comm/algorithms.h: the collective algorithms as free functions over a transport and the call's
// context, as gloo's are functions over a context. The Communicator (comm/communicator.h) numbers
// the calls, makes each one's context and runs them in order; the host backend and the CUDA
// staged backend (comm/backend.h) drive them on host buffers.
//
// Every function reads the call (count, dtype, reduce op, root) from c.fp, the fingerprint every
// peer checks, and moves host memory only. Sizes: c.fp.count elements of c.fp.dtype per rank.
//   ring   (collectives_ring.cpp)   all_reduce, all_gather, reduce_scatter, on comm/ring.h
//   chain  (collectives_chain.cpp)  broadcast, reduce: pipelined chains in ring order
//   direct (collectives_direct.cpp) agreement (dissemination), barrier, gather, scatter
#pragma once
#include <cstddef>

#include "comm/deadline.h"
#include "comm/frame.h"
#include "comm/ring.h"
#include "comm/transport.h"

namespace engine::comm {

// One collective call: made by the Communicator when the call starts executing.
struct CollContext {
  Transport& tp;
  Fingerprint fp;  // this call: sequence number, op, count, dtype, reduce op, root
  Millis timeout;  // bounds each stage's waits (deadline())
  size_t segment_bytes = 128 << 10;  // pipelining grain of the ring and the chains
  RingObserver* observer = nullptr;  // sees every step of the ring collectives (may be null)

  int rank() const { return tp.rank(); }
  int world() const { return tp.world(); }
  Deadline deadline() const { return Deadline::after(timeout); }
  // Elements per segment (at least 1).
  size_t segment_count() const;
};

// The algorithm of c.fp.op (comm/communicator.h's choice for each collective): in and out as
// below; the in-place ones (all_reduce, broadcast, reduce) work on out, barrier on neither.
void run_algorithm(const CollContext& c, const void* in, void* out);

// In place on every rank: reduce-scatter then all-gather on the ring.
void ring_all_reduce(const CollContext& c, void* data);
// out holds world * count elements: rank r's `in` lands at out + r * count.
void ring_all_gather(const CollContext& c, const void* in, void* out);
// in holds world * count elements; out (count) gets the reduction of every rank's chunk r.
void ring_reduce_scatter(const CollContext& c, const void* in, void* out);

// Root's buffer is copied to every rank.
void chain_broadcast(const CollContext& c, void* data);
// Root's buffer receives the reduction; other ranks' buffers are left unchanged.
void chain_reduce(const CollContext& c, void* data);

// Returns once every rank is known to call the same collective as c.fp (dissemination).
void agree(const CollContext& c);
void barrier(const CollContext& c);
// Into root's out (world * count elements; may be null elsewhere).
void direct_gather(const CollContext& c, const void* in, void* out);
// From root's in (world * count elements; may be null elsewhere) into every rank's out.
void direct_scatter(const CollContext& c, const void* in, void* out);

}  // namespace engine::comm
