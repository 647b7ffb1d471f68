// comm/backends/staged/pipeline.h: the staged all_reduce pipelined (--staged-pipeline N): the
// tensor cut into segments that go, each through one of N pinned host slots, down (device ->
// slot), through the host collective (in place on the slot) and up (slot -> device), so that with
// N >= 3 segment i+1 downloads while segment i is in the host ring and segment i-1 uploads. The
// schedule is written over PipelineOps, which the CUDA slots (cuda_slots.h) and the tests' fake
// (memcpy on threads) implement.
#pragma once
#include <cstddef>
#include <vector>

#include "comm/algorithms/context.h"

namespace engine::comm::staged {

// Bytes [offset, offset + bytes) of the tensor.
struct Segment {
  size_t offset = 0, bytes = 0;
};

// The segments of a tensor of `bytes`: as many as bytes / min_segment allows, at most
// max_segments, each a multiple of `elem` bytes (the last one the rest); one segment when bytes <=
// min_segment; none when bytes == 0.
std::vector<Segment> cut(size_t bytes, size_t elem, size_t min_segment, size_t max_segments);

// What the schedule does with a segment. Every call but wait() only queues work.
class PipelineOps {
 public:
  virtual ~PipelineOps() = default;
  // Queues the copy of seg of the device tensor into `slot`, ordered after the slot's last upload
  // (on the device: the host does not wait for it).
  virtual void download(const Segment& seg, int slot) = 0;
  // Blocks the host until slot's last download is in the slot (bounded by the call's timeout).
  virtual void wait(int slot) = 0;
  // The host collective on slot's bytes, in place: every rank reduces the same segments in the same
  // order.
  virtual void host_reduce(const Segment& seg, int slot) = 0;
  // Queues the copy of slot back into seg of the device tensor.
  virtual void upload(int slot, const Segment& seg) = 0;
  // The device's later work waits for every upload queued (the host does not).
  virtual void finish() = 0;
};

// Moves each segment down, through host_reduce and up with `slots` slots (1..kMaxSlots) in flight:
// slot i % slots carries segment i; segment i + slots is queued into it right after segment i's
// upload. One host wait per segment (for its download), none for the uploads.
void run_pipeline(PipelineOps& ops, const std::vector<Segment>& segs, int slots);

// The host all_reduce of c (its count, dtype, reduce op) restricted to one segment, in place on
// `data` (the segment's bytes): the same host algorithms, the fingerprint's count the segment's.
void host_reduce_segment(const CollContext& c, const Segment& seg, void* data);

inline constexpr int kMaxSlots = 4;
// The pipeline's grain: segments of at least 256 KiB, at most 16 per tensor.
inline constexpr size_t kMinSegment = size_t(256) << 10;
inline constexpr size_t kMaxSegments = 16;

// --staged-pipeline N of this process (train, allreduce_bench): 1 (the default) keeps the staged
// backend's unpipelined path (one download, the host collective, one upload, two host waits);
// 2..4 pipelines CUDA all_reduce over that many slots. Set before the first collective.
void set_pipeline_slots(int n);
int pipeline_slots();

}  // namespace engine::comm::staged
