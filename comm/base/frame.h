// comm/base/frame.h: what travels between ranks. Every message is a frame: a 40-byte header, the
// payload, and zero padding up to a multiple of 8 bytes (so elements in shared-memory rings stay
// aligned). The header carries the collective's fingerprint (sequence number, op, count, dtype,
// reduce op, root) so that a receiver can tell exactly how its peer's call differs from its own.
#pragma once
#include <cstdint>
#include <string>

#include "comm/base/reduce.h"
#include "io/dtype.h"

namespace engine::comm {

enum class CollOp : uint8_t {
  None = 0,
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  Gather,
  Scatter,
  ReduceScatter,
  Barrier,
  Send,       // point-to-point; root holds the tag
  AllToAll,   // count: elements of each message (all_to_all_single: of this pair's message)
  ChunkTree,  // the fixed-tree all_reduce (comm/algorithms/chunk_tree.h); root holds the leaves
};
const char* coll_op_name(CollOp op);

// What every rank of a collective must agree on. For point-to-point messages, seq counts the
// messages from one rank to another and root is the tag.
struct Fingerprint {
  uint64_t seq = 0;
  CollOp op = CollOp::None;
  DType dtype = DType::F32;
  ReduceOp redop = ReduceOp::Sum;
  int32_t root = -1;
  uint64_t count = 0;
  // The communicator's group (comm/groups/group_transport.h): 0 for the job's own, else the id
  // every member of a split() group shares. Travels in the top 16 bits of the frame's seq.
  uint16_t group = 0;

  // "#12 all_reduce(count=1013, F32, SUM)", "group 7 #3 broadcast(...)" in a group
  std::string str() const;
  // Same call apart from the sequence number.
  bool same_call(const Fingerprint& o) const {
    return op == o.op && dtype == o.dtype && redop == o.redop && root == o.root && count == o.count;
  }
};

enum class FrameKind : uint8_t { Data = 1, Abort = 2 };

struct FrameHeader {
  uint32_t magic = kMagic;
  uint8_t kind = static_cast<uint8_t>(FrameKind::Data);
  uint8_t op = 0;
  uint8_t dtype = 0;
  uint8_t redop = 0;
  int32_t root = -1;
  uint32_t step = 0;  // which message of the collective this is (schedule step x segment)
  uint64_t seq = 0;   // low 48 bits: the sequence number; high 16: the group
  uint64_t count = 0;
  uint64_t nbytes = 0;  // payload bytes that follow

  static constexpr uint32_t kMagic = 0x46474E45;  // "ENGF"

  static FrameHeader data(const Fingerprint& f, uint32_t step, uint64_t nbytes);
  Fingerprint fingerprint() const;
};
static_assert(sizeof(FrameHeader) == 40);

inline size_t frame_pad(size_t nbytes) {
  return (8 - nbytes % 8) % 8;
}

}  // namespace engine::comm
