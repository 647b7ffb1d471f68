// comm/algorithms/ring.cpp: the ring collectives - all_reduce (reduce-scatter then all-gather),
// reduce_scatter (the first phase alone) and all_gather (the second alone) - on one pipelined
// executor driven by RingSchedule (ring_schedule.h, which explains the algorithm step by step).
//
// Pipelining, as gloo's ring: every receive of the whole collective is posted at once (the
// transport reduces each segment into the buffer as its bytes arrive, straight from shared memory
// or through a small socket scratch buffer), and segment k of step s+1 is sent as soon as segment
// k of step s has been received and reduced. So while one segment is being added, the next ones
// are already on the wire in both directions.
//
// Safety: every rank's last receive depends, hop by hop, on frames every other rank sent after
// checking its own left neighbour's fingerprint, so no rank finishes unless all ranks agree.
#include "comm/algorithms/ring.h"

#include <cstring>
#include <vector>

#include "core/error.h"

namespace engine::comm {

namespace {

struct RingStep {
  RingPhase phase;
  int s;  // within the phase
};

// One run of the ring over a buffer: the schedule, and which phases run.
class RingRun {
 public:
  RingRun(const CollContext& c, const RingSchedule& sched, std::byte* buf, bool reduce_scatter,
          bool all_gather)
      : c_(c),
        S_(sched),
        buf_(buf),
        es_(dtype_size(c.fp.dtype)),
        seg_(c.segment_count()),
        nseg_(sched.segments(seg_)),
        rs_(reduce_scatter),
        ag_(all_gather),
        dl_(c.deadline()) {
    const int W = S_.world();
    if (rs_)
      for (int s = 0; s < W - 1; ++s) steps_.push_back({RingPhase::ReduceScatter, s});
    if (ag_)
      for (int s = 0; s < W - 1; ++s) steps_.push_back({RingPhase::AllGather, s});
  }

  void run();

 private:
  // Transfers are (step, segment) pairs, step-major: t = step * nseg + segment.
  Range segment_of(size_t t, bool sending) const {
    const RingStep& st = steps_[t / nseg_];
    int ch = sending ? S_.send_chunk(st.phase, st.s) : S_.recv_chunk(st.phase, st.s);
    return S_.segment(ch, t % nseg_, seg_);
  }
  FrameHeader header(size_t t, const Range& r) const {
    return FrameHeader::data(c_.fp, static_cast<uint32_t>(t), r.size() * es_);
  }
  void post_receives();
  void send(size_t t);
  void wait_recv(size_t t);
  void observe(size_t step_index) const;

  const CollContext& c_;
  const RingSchedule& S_;
  std::byte* buf_;
  size_t es_, seg_, nseg_;
  bool rs_, ag_;
  Deadline dl_;
  std::vector<RingStep> steps_;
  std::vector<RequestPtr> recvs_, sends_;
};

void RingRun::run() {
  const size_t T = steps_.size() * nseg_;
  post_receives();
  sends_.resize(T);
  for (size_t t = 0; t < T; ++t) {
    if (t >= nseg_) wait_recv(t - nseg_);  // segment k of the previous step is complete
    send(t);
  }
  for (size_t t = T - nseg_; t < T; ++t) wait_recv(t);
  for (auto& s : sends_) c_.tp.wait(s, dl_);
  if (c_.fp.redop == ReduceOp::Avg && !ag_) {
    Range own = S_.chunk(S_.owned_chunk());
    divide_by(buf_ + own.begin * es_, own.size(), c_.fp.dtype, S_.world());
  }
}

void RingRun::post_receives() {
  recvs_.resize(steps_.size() * nseg_);
  for (size_t t = 0; t < recvs_.size(); ++t) {
    Range r = segment_of(t, false);
    std::byte* dst = buf_ + r.begin * es_;
    recvs_[t] = steps_[t / nseg_].phase == RingPhase::ReduceScatter
                    ? c_.tp.irecv_reduce(S_.left(), Lane::Collective, header(t, r), dst,
                                         c_.fp.dtype, c_.fp.redop)
                    : c_.tp.irecv(S_.left(), Lane::Collective, header(t, r), dst);
  }
}

void RingRun::send(size_t t) {
  Range r = segment_of(t, true);
  std::byte* src = buf_ + r.begin * es_;
  const RingStep& st = steps_[t / nseg_];
  // AVG: the owner divides its finished chunk once, before it travels round the ring.
  if (c_.fp.redop == ReduceOp::Avg && rs_ && st.phase == RingPhase::AllGather && st.s == 0)
    divide_by(src, r.size(), c_.fp.dtype, S_.world());
  sends_[t] = c_.tp.isend(S_.right(), Lane::Collective, header(t, r), src);
}

void RingRun::wait_recv(size_t t) {
  c_.tp.wait(recvs_[t], dl_);
  if (t % nseg_ == nseg_ - 1) observe(t / nseg_);
}

void RingRun::observe(size_t step_index) const {
  if (!c_.observer) return;
  const RingStep& st = steps_[step_index];
  RingStepInfo info;
  info.rank = S_.rank();
  info.world = S_.world();
  info.phase = st.phase;
  info.step = st.s;
  info.left = S_.left();
  info.right = S_.right();
  info.send_chunk = S_.send_chunk(st.phase, st.s);
  info.recv_chunk = S_.recv_chunk(st.phase, st.s);
  info.sent = S_.chunk(info.send_chunk);
  info.received = S_.chunk(info.recv_chunk);
  info.buffer = buf_;
  info.count = S_.count();
  info.dtype = c_.fp.dtype;
  c_.observer->on_step(info);
}

void run_ring(const CollContext& c, const RingSchedule& sched, std::byte* buf, bool reduce_scatter,
              bool all_gather) {
  if (sched.world() == 1) return;
  RingRun(c, sched, buf, reduce_scatter, all_gather).run();
}

}  // namespace

void ring_all_reduce(const CollContext& c, void* data) {
  ENGINE_CHECK(data || c.fp.count == 0, "all_reduce: null buffer");
  run_ring(c, RingSchedule(c.rank(), c.world(), c.fp.count, 0), static_cast<std::byte*>(data), true,
           true);
}

void ring_all_gather(const CollContext& c, const void* in, void* out) {
  const size_t count = c.fp.count;
  ENGINE_CHECK((in && out) || count == 0, "all_gather: null buffer");
  const size_t nbytes = count * dtype_size(c.fp.dtype);
  auto* o = static_cast<std::byte*>(out);
  if (nbytes && o + c.rank() * nbytes != in) std::memcpy(o + c.rank() * nbytes, in, nbytes);
  run_ring(c, RingSchedule(c.rank(), c.world(), count * c.world(), -1), o, false, true);
}

void ring_reduce_scatter(const CollContext& c, const void* in, void* out) {
  const size_t count = c.fp.count;
  ENGINE_CHECK((in && out) || count == 0, "reduce_scatter: null buffer");
  const size_t nbytes = count * dtype_size(c.fp.dtype);
  // Work on a copy: the input stays as it was.
  std::vector<std::byte> work(nbytes * c.world());
  if (nbytes) std::memcpy(work.data(), in, work.size());
  run_ring(c, RingSchedule(c.rank(), c.world(), count * c.world(), -1), work.data(), true, false);
  if (nbytes) std::memcpy(out, work.data() + c.rank() * nbytes, nbytes);
}

}  // namespace engine::comm
