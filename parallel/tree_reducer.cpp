// parallel/tree_reducer.cpp: see tree_reducer.h.
#include "parallel/tree_reducer.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "core/chunk_tree.h"
#include "core/error.h"

namespace engine::parallel {
namespace {

using Buffer = std::vector<float>;

struct AddInto {
  void operator()(Buffer& a, const Buffer& b) const {
    for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  }
};

// One node's partials of every parameter and the loss, packed in that order.
struct Packed {
  chunk_tree::Node node;
  Buffer data;
};

void pack(const Tensor& t, size_t at, const std::string& name, std::vector<Packed>* nodes,
          nn::TreeNodes taken) {
  ENGINE_CHECK(taken.size() == nodes->size(), "world-invariant step: ", name, " holds ",
               taken.size(), " tree nodes where the first parameter holds ", nodes->size());
  for (size_t j = 0; j < taken.size(); ++j) {
    Packed& p = (*nodes)[j];
    ENGINE_CHECK(taken[j].first == p.node, "world-invariant step: ", name, "'s node ",
                 taken[j].first.str(), " where the first parameter has ", p.node.str());
    const Tensor h = taken[j].second.to(Device::cpu());
    ENGINE_CHECK(h.numel() == t.numel(), "world-invariant step: ", name, "'s partial has ",
                 h.numel(), " values for ", t.numel());
    std::memcpy(p.data.data() + at, h.data<float>(), sizeof(float) * h.numel());
  }
}

}  // namespace

TreeReducer::TreeReducer(comm::Communicator* comm, nn::NamedTensors params)
    : comm_(comm), params_(std::move(params)) {
  for (const auto& [name, p] : params_) count_ += static_cast<size_t>(p.numel());
}

Tensor TreeReducer::collect(nn::ChunkedGradients& cg) {
  ENGINE_CHECK(!params_.empty(), "world-invariant step: a model without parameters");
  std::vector<Packed> nodes;
  size_t at = 0;
  for (const auto& [name, p] : params_) {
    nn::TreeNodes taken = cg.take(p, name.c_str());
    if (nodes.empty())
      for (const auto& [node, t] : taken) nodes.push_back({node, Buffer(count_)});
    pack(p, at, "parameter '" + name + "'", &nodes, std::move(taken));
    at += static_cast<size_t>(p.numel());
  }
  pack(Tensor::from_vector({0.0f}, {}), at, "the loss", &nodes, cg.take_loss());
  Buffer root;
  if (comm_) {
    std::vector<comm::TreePartial> parts;
    for (const Packed& p : nodes) parts.push_back({p.node, p.data.data()});
    root.resize(count_);
    comm_->chunk_tree_all_reduce(cg.chunks(), parts, root.data(), count_, DType::F32);
    group_bytes_ += tree_bytes(count_, comm_->size(), comm_->rank(), nodes.size());
  } else {
    std::vector<std::pair<chunk_tree::Node, Buffer>> held;
    for (Packed& p : nodes) held.emplace_back(p.node, std::move(p.data));
    root = chunk_tree::fold(cg.chunks(), std::move(held), AddInto{});
  }
  at = 0;
  for (auto& [name, p] : params_) {
    const auto n = static_cast<size_t>(p.numel());
    Tensor sum = Tensor::from_vector(Buffer(root.begin() + at, root.begin() + at + n), p.shape())
                     .to(p.device());
    at += n;
    Tensor g = p.grad();
    if (g.defined())
      g.add_(sum);
    else
      p.set_grad(sum);
  }
  const float mean = root[at] / static_cast<float>(cg.plan().global_batch);
  return Tensor::from_vector({mean}, {});
}

nn::TreeSum TreeReducer::tree_sum() {
  if (!comm_) return {};
  return [this, comm = comm_](size_t leaves, nn::DoubleNodes nodes) {
    ENGINE_CHECK(!nodes.empty(), "world-invariant step: rank ", comm->rank(),
                 " holds no chunk of the batch");
    const size_t width = nodes.front().second.size();
    std::vector<comm::TreePartial> parts;
    for (const auto& [node, v] : nodes) parts.push_back({node, v.data()});
    std::vector<double> root(width);
    comm->chunk_tree_all_reduce(leaves, parts, root.data(), width, DType::F64);
    // Counted with the step's bytes: doubles, twice a float's.
    group_bytes_ += 2 * tree_bytes(width, comm->size(), comm->rank(), nodes.size());
    return root;
  };
}

void TreeReducer::then(std::function<void()> after, int64_t after_bytes) {
  after_ = std::move(after);
  after_bytes_ = after_bytes;
}

void TreeReducer::finish() {
  last_bytes_ = group_bytes_ + after_bytes_;
  group_bytes_ = 0;
  if (after_) after_();
}

int64_t TreeReducer::bytes_per_step(int64_t step) const {
  (void)step;
  return last_bytes_;
}

int64_t tree_bytes(size_t count, int world, int rank, size_t nodes) {
  if (world <= 1) return 0;
  const size_t own =
      chunk_tree::even_split(count, static_cast<size_t>(world), static_cast<size_t>(rank)).size();
  const size_t sent = nodes * (count - own) + own * static_cast<size_t>(world - 1);
  return static_cast<int64_t>(sent * sizeof(float));
}

}  // namespace engine::parallel
