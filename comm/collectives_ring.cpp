// comm/collectives_ring.cpp: the ring collectives - all_reduce (reduce-scatter then all-gather),
// reduce_scatter (the first phase alone) and all_gather (the second alone) - on one pipelined
// executor driven by RingSchedule (ring.h, which explains the algorithm step by step).
//
// Pipelining, as gloo's ring: every receive of the whole collective is posted at once (the
// transport reduces each segment into the buffer as its bytes arrive, straight from shared memory
// or through a small socket scratch buffer), and segment k of step s+1 is sent as soon as segment
// k of step s has been received and reduced. So while one segment is being added, the next ones
// are already on the wire in both directions.
//
// Safety: every rank's last receive depends, hop by hop, on frames every other rank sent after
// checking its own left neighbour's fingerprint, so no rank finishes unless all ranks agree.
#include <cstring>
#include <vector>

#include "comm/communicator.h"
#include "core/error.h"

namespace engine::comm {

struct Communicator::RingJob {
  RingSchedule sched;
  std::byte* buf = nullptr;
  DType dtype = DType::F32;
  ReduceOp op = ReduceOp::SUM;
  bool reduce_scatter = true;  // run the reduce-scatter phase
  bool all_gather = true;      // run the all-gather phase
  Fingerprint fp;
};

void Communicator::run_ring(const RingJob& job) {
  const RingSchedule& S = job.sched;
  const int W = S.world();
  if (W == 1) return;
  const size_t es = dtype_size(job.dtype);
  const size_t seg = segment_count(job.dtype);
  const size_t nseg = S.segments(seg);
  const bool avg = job.op == ReduceOp::AVG;

  struct Step {
    RingPhase phase;
    int s;
  };
  std::vector<Step> steps;
  if (job.reduce_scatter)
    for (int s = 0; s < W - 1; ++s) steps.push_back({RingPhase::ReduceScatter, s});
  if (job.all_gather)
    for (int s = 0; s < W - 1; ++s) steps.push_back({RingPhase::AllGather, s});
  const size_t T = steps.size() * nseg;  // transfers: (step, segment), step-major

  Transport& tp = *transport_;
  const Deadline dl = deadline();
  auto seg_of = [&](size_t t, bool sending) {
    const Step& st = steps[t / nseg];
    int c = sending ? S.send_chunk(st.phase, st.s) : S.recv_chunk(st.phase, st.s);
    return S.segment(c, t % nseg, seg);
  };

  std::vector<RequestPtr> recvs(T), sends(T);
  for (size_t t = 0; t < T; ++t) {
    Range r = seg_of(t, false);
    FrameHeader h = FrameHeader::data(job.fp, static_cast<uint32_t>(t), r.size() * es);
    std::byte* dst = job.buf + r.begin * es;
    recvs[t] = steps[t / nseg].phase == RingPhase::ReduceScatter
                   ? tp.irecv_reduce(S.left(), Stream::Coll, h, dst, job.dtype, job.op)
                   : tp.irecv(S.left(), Stream::Coll, h, dst);
  }

  auto observe = [&](size_t step_index) {
    if (!observer_) return;
    const Step& st = steps[step_index];
    RingStepInfo info;
    info.rank = S.rank();
    info.world = W;
    info.phase = st.phase;
    info.step = st.s;
    info.left = S.left();
    info.right = S.right();
    info.send_chunk = S.send_chunk(st.phase, st.s);
    info.recv_chunk = S.recv_chunk(st.phase, st.s);
    info.sent = S.chunk(info.send_chunk);
    info.received = S.chunk(info.recv_chunk);
    info.buffer = job.buf;
    info.count = S.count();
    info.dtype = job.dtype;
    observer_->on_step(info);
  };
  auto wait_recv = [&](size_t t) {
    tp.wait(recvs[t], dl);
    if (t % nseg == nseg - 1) observe(t / nseg);
  };

  for (size_t t = 0; t < T; ++t) {
    if (t >= nseg) wait_recv(t - nseg);  // segment k of the previous step is complete
    Range r = seg_of(t, true);
    std::byte* src = job.buf + r.begin * es;
    const Step& st = steps[t / nseg];
    // AVG: the owner divides its finished chunk once, before it travels round the ring.
    if (avg && job.reduce_scatter && st.phase == RingPhase::AllGather && st.s == 0)
      divide_by(src, r.size(), job.dtype, W);
    FrameHeader h = FrameHeader::data(job.fp, static_cast<uint32_t>(t), r.size() * es);
    sends[t] = tp.isend(S.right(), Stream::Coll, h, src);
  }
  for (size_t t = T - nseg; t < T; ++t) wait_recv(t);
  for (auto& s : sends) tp.wait(s, dl);

  if (avg && !job.all_gather) {
    Range own = S.chunk(S.owned_chunk());
    divide_by(job.buf + own.begin * es, own.size(), job.dtype, W);
  }
}

void Communicator::do_all_reduce(void* data, size_t count, DType dt, ReduceOp op) {
  Fingerprint fp = begin(CollOp::AllReduce, count, dt, op, -1);
  ENGINE_CHECK(data || count == 0, "all_reduce: null buffer");
  RingJob job{RingSchedule(rank(), size(), count, 0),
              static_cast<std::byte*>(data),
              dt,
              op,
              true,
              true,
              fp};
  run_ring(job);
}

void Communicator::do_all_gather(const void* in, void* out, size_t count, DType dt) {
  Fingerprint fp = begin(CollOp::AllGather, count, dt, ReduceOp::SUM, -1);
  ENGINE_CHECK((in && out) || count == 0, "all_gather: null buffer");
  const size_t nbytes = count * dtype_size(dt);
  auto* o = static_cast<std::byte*>(out);
  if (nbytes && o + rank() * nbytes != in) std::memcpy(o + rank() * nbytes, in, nbytes);
  RingJob job{
      RingSchedule(rank(), size(), count * size(), -1), o, dt, ReduceOp::SUM, false, true, fp};
  run_ring(job);
}

void Communicator::do_reduce_scatter(const void* in, void* out, size_t count, DType dt,
                                     ReduceOp op) {
  Fingerprint fp = begin(CollOp::ReduceScatter, count, dt, op, -1);
  ENGINE_CHECK((in && out) || count == 0, "reduce_scatter: null buffer");
  const size_t nbytes = count * dtype_size(dt);
  // Work on a copy: the input stays as it was.
  std::vector<std::byte> work(nbytes * size());
  if (nbytes) std::memcpy(work.data(), in, work.size());
  RingJob job{
      RingSchedule(rank(), size(), count * size(), -1), work.data(), dt, op, true, false, fp};
  run_ring(job);
  if (nbytes) std::memcpy(out, work.data() + rank() * nbytes, nbytes);
}

}  // namespace engine::comm
