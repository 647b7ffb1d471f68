// comm/base/frame.cpp: see frame.h.
#include "comm/base/frame.h"

#include <iterator>
#include <sstream>

namespace engine::comm {

namespace {
constexpr uint64_t kSeqMask = (uint64_t{1} << 48) - 1;
}  // namespace

const char* coll_op_name(CollOp op) {
  static constexpr const char* kNames[] = {
      "none",    "all_reduce",     "broadcast", "reduce", "all_gather", "gather",
      "scatter", "reduce_scatter", "barrier",   "send",   "all_to_all", "chunk_tree_all_reduce"};
  const auto i = static_cast<size_t>(op);
  return i < std::size(kNames) ? kNames[i] : "unknown";
}

std::string Fingerprint::str() const {
  std::ostringstream os;
  if (group) os << "group " << group << " ";
  os << "#" << seq << " " << coll_op_name(op) << "(";
  if (op == CollOp::Barrier) {
    os << ")";
    return os.str();
  }
  os << "count=" << count << ", " << dtype_name(dtype);
  if (op == CollOp::AllReduce || op == CollOp::Reduce || op == CollOp::ReduceScatter ||
      op == CollOp::ChunkTree)
    os << ", " << reduce_op_name(redop);
  if (op == CollOp::ChunkTree) os << ", leaves=" << root;
  if (op == CollOp::Broadcast || op == CollOp::Reduce || op == CollOp::Gather ||
      op == CollOp::Scatter)
    os << ", root=" << root;
  if (op == CollOp::Send) os << ", tag=" << root;
  os << ")";
  return os.str();
}

FrameHeader FrameHeader::data(const Fingerprint& f, uint32_t step, uint64_t nbytes) {
  FrameHeader h;
  h.op = static_cast<uint8_t>(f.op);
  h.dtype = static_cast<uint8_t>(f.dtype);
  h.redop = static_cast<uint8_t>(f.redop);
  h.root = f.root;
  h.step = step;
  h.seq = (f.seq & kSeqMask) | (static_cast<uint64_t>(f.group) << 48);
  h.count = f.count;
  h.nbytes = nbytes;
  return h;
}

Fingerprint FrameHeader::fingerprint() const {
  Fingerprint f;
  f.seq = seq & kSeqMask;
  f.group = static_cast<uint16_t>(seq >> 48);
  f.op = static_cast<CollOp>(op);
  f.dtype = static_cast<DType>(dtype);
  f.redop = static_cast<ReduceOp>(redop);
  f.root = root;
  f.count = count;
  return f;
}

}  // namespace engine::comm
