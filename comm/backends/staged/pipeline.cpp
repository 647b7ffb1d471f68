// comm/backends/staged/pipeline.cpp: the pipelined staged all_reduce's segments and schedule.
#include "comm/backends/staged/pipeline.h"

#include <algorithm>
#include <atomic>

#include "comm/algorithms/algorithms.h"
#include "core/error.h"

namespace engine::comm::staged {

namespace {
std::atomic<int> g_slots{1};
}  // namespace

std::vector<Segment> cut(size_t bytes, size_t elem, size_t min_segment, size_t max_segments) {
  ENGINE_CHECK(elem > 0 && max_segments > 0, "staged pipeline: bad segment arithmetic");
  std::vector<Segment> out;
  if (bytes == 0) return out;
  const size_t elems = (bytes + elem - 1) / elem;
  const size_t n = std::clamp<size_t>(bytes / std::max<size_t>(min_segment, 1), 1, max_segments);
  const size_t per = (elems + n - 1) / n;  // elements per segment, the last one fewer
  for (size_t first = 0; first < elems; first += per) {
    const size_t count = std::min(per, elems - first);
    out.push_back({first * elem, std::min(count * elem, bytes - first * elem)});
  }
  return out;
}

void run_pipeline(PipelineOps& ops, const std::vector<Segment>& segs, int slots) {
  ENGINE_CHECK(slots >= 1 && slots <= kMaxSlots, "staged pipeline: ", slots, " slots (1..",
               kMaxSlots, ")");
  const size_t n = segs.size(), k = static_cast<size_t>(slots);
  for (size_t i = 0; i < std::min(n, k); ++i) ops.download(segs[i], static_cast<int>(i));
  for (size_t i = 0; i < n; ++i) {
    const int s = static_cast<int>(i % k);
    ops.wait(s);
    ops.host_reduce(segs[i], s);
    ops.upload(s, segs[i]);
    if (i + k < n) ops.download(segs[i + k], s);  // after the upload, on the device
  }
  if (n > 0) ops.finish();
}

void host_reduce_segment(const CollContext& c, const Segment& seg, void* data) {
  const size_t elem = dtype_size(c.fp.dtype);
  ENGINE_CHECK(seg.offset % elem == 0 && seg.bytes % elem == 0, "comm on rank ", c.rank(),
               ": staged segment [", seg.offset, ", +", seg.bytes, ") splits a ",
               dtype_name(c.fp.dtype), " element");
  CollContext sub = c;
  sub.fp.count = seg.bytes / elem;
  run_algorithm(sub, data, data);
}

void set_pipeline_slots(int n) {
  ENGINE_CHECK(n >= 1 && n <= kMaxSlots, "--staged-pipeline must be 1..", kMaxSlots, ", got ", n);
  g_slots.store(n, std::memory_order_relaxed);
}

int pipeline_slots() {
  return g_slots.load(std::memory_order_relaxed);
}

}  // namespace engine::comm::staged
