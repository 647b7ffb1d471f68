// comm/algorithms/context.h: one collective call as the algorithms see it - the transport, the
// call's fingerprint (count, dtype, reduce op, root: what every peer checks), the timeout, the
// pipelining grain and the algorithm chosen (comm/algorithms/tuning.h). The Communicator
// (comm/communicator.h) makes one when a call starts executing and hands it to an algorithm
// (comm/algorithms/algorithms.h) or a backend (comm/backends/).
#pragma once
#include <algorithm>
#include <cstddef>

#include "comm/algorithms/ring_schedule.h"
#include "comm/algorithms/tuning.h"
#include "comm/base/deadline.h"
#include "comm/base/frame.h"
#include "comm/transport/transport.h"

namespace engine::comm {

struct CollContext {
  Transport& tp;
  Fingerprint fp;  // this call: sequence number, op, count, dtype, reduce op, root
  Millis timeout;  // bounds each stage's waits (deadline())
  size_t segment_bytes = 128 << 10;  // pipelining grain of the ring and the chains
  RingObserver* observer = nullptr;  // sees every step of the ring collectives (may be null)
  Algo algo = Algo::Auto;            // comm/algorithms/tuning.h

  int rank() const { return tp.rank(); }
  int world() const { return tp.world(); }
  Deadline deadline() const { return Deadline::after(timeout); }
  // Elements per segment (at least 1).
  size_t segment_count() const { return std::max<size_t>(1, segment_bytes / dtype_size(fp.dtype)); }
};

}  // namespace engine::comm
