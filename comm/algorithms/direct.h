// comm/algorithms/direct.h: the collectives that talk to every rank directly (direct.cpp):
// agreement and the barrier by dissemination, gather and scatter to and from the root. Host memory
// only; sizes: c.fp.count elements of c.fp.dtype per rank.
#pragma once
#include "comm/algorithms/context.h"

namespace engine::comm {

// Returns once every rank is known to call the same collective as c.fp (dissemination).
void agree(const CollContext& c);
void barrier(const CollContext& c);
// Into root's out (world * count elements; may be null elsewhere).
void direct_gather(const CollContext& c, const void* in, void* out);
// From root's in (world * count elements; may be null elsewhere) into every rank's out.
void direct_scatter(const CollContext& c, const void* in, void* out);

}  // namespace engine::comm
