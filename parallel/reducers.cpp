// parallel/reducers.cpp: see reducers.h.
#include "parallel/reducers.h"

#include <utility>

#include "comm/grad_sync.h"
#include "comm/half_grad_sync.h"
#include "comm/powersgd.h"
#include "parallel/tree_reducer.h"
#include "parallel/zero.h"

namespace engine::parallel {
namespace {

// One process: the gradients are already everyone's.
class LocalReducer : public comm::GradReducer {
 public:
  void begin(int64_t step) override { (void)step; }
  void finish() override {}
  int64_t bytes_per_step(int64_t step) const override { return 0; }
  std::string name() const override { return "none"; }
};

// The optimizer over the model's parameters, as built.
class Unsharded : public StepOptimizer {
 public:
  explicit Unsharded(std::unique_ptr<nn::Optimizer> opt) : opt_(std::move(opt)) {}
  void zero_grad() override { opt_->zero_grad(); }
  void step() override { opt_->step(); }
  void count_replayed_step() override { opt_->count_replayed_step(); }
  int64_t steps() const override { return opt_->steps(); }
  nn::NamedTensors checked() const override { return opt_->params(); }
  comm::Communicator* verdict_comm() const override { return nullptr; }
  size_t state_bytes() const override { return state_nbytes(opt_->state()); }
  const nn::Optimizer& gathered() override { return *opt_; }

 private:
  std::unique_ptr<nn::Optimizer> opt_;
};

std::unique_ptr<comm::GradReducer> make_reducer(comm::Communicator& comm, nn::NamedTensors params,
                                                const ReducerOptions& r) {
  switch (r.kind) {
    case ReducerKind::Bf16:
    case ReducerKind::Fp16:
      return std::make_unique<comm::HalfGradSync>(
          comm, std::move(params), r.kind == ReducerKind::Bf16 ? DType::BF16 : DType::F16,
          r.bucket_bytes);
    case ReducerKind::PowerSgd:
      return std::make_unique<comm::PowerSgd>(comm, std::move(params), r.powersgd_rank,
                                              r.powersgd_start, r.seed, r.bucket_bytes);
    case ReducerKind::AllReduce:
      return std::make_unique<comm::GradSync>(comm, std::move(params), comm::SyncMode::AllReduce,
                                              r.bucket_bytes);
    case ReducerKind::ReduceBroadcast:
      return std::make_unique<comm::GradSync>(comm, std::move(params),
                                              comm::SyncMode::ReduceBroadcast, r.bucket_bytes);
    default:
      return std::make_unique<comm::GradSync>(comm, std::move(params), comm::SyncMode::Bucketed,
                                              r.bucket_bytes);
  }
}

}  // namespace

std::string reducer_kind_name(ReducerKind k) {
  static const char* const kNames[] = {"allreduce", "reduce-broadcast", "bucketed", "bf16",
                                       "fp16",      "powersgd",         "zero1",    "tree"};
  return kNames[static_cast<int>(k)];
}

bool is_compression(ReducerKind k) {
  return k == ReducerKind::Bf16 || k == ReducerKind::Fp16 || k == ReducerKind::PowerSgd;
}

std::unique_ptr<nn::Optimizer> make_optimizer(const OptimizerOptions& o, nn::NamedTensors params) {
  if (o.kind == OptimizerKind::Adam) {
    kernels::AdamConfig a;
    a.lr = o.lr;
    return std::make_unique<nn::Adam>(std::move(params), a);
  }
  kernels::SgdConfig s;
  s.lr = o.lr;
  s.momentum = o.momentum;
  return std::make_unique<nn::SGD>(std::move(params), s);
}

Synchronisation make_synchronisation(comm::Communicator* comm, nn::NamedTensors params,
                                     const ReducerOptions& r, const OptimizerOptions& o,
                                     std::unique_ptr<nn::Optimizer> opt) {
  Synchronisation s;
  if (r.kind == ReducerKind::Tree) {
    auto tree = std::make_unique<TreeReducer>(comm, params);
    if (r.tree_zero1 && comm) {  // one process: nothing to shard
      auto zero = std::make_unique<Zero1>(*comm, std::move(params), r.bucket_bytes, o, opt->state(),
                                          opt->steps());
      tree->then([z = zero.get()] { z->take_shards(); }, zero->all_gather_bytes());
      s.optimizer = std::move(zero);
    } else {
      s.optimizer = std::make_unique<Unsharded>(std::move(opt));
    }
    s.tree = tree.get();
    s.reducer = std::move(tree);
  } else if (!comm) {
    s.optimizer = std::make_unique<Unsharded>(std::move(opt));
    s.reducer = std::make_unique<LocalReducer>();
  } else if (r.kind == ReducerKind::Zero1) {
    auto zero = std::make_unique<Zero1>(*comm, std::move(params), r.bucket_bytes, o, opt->state(),
                                        opt->steps());
    s.reducer = zero->make_reducer();
    s.optimizer = std::move(zero);
  } else {
    s.reducer = make_reducer(*comm, std::move(params), r);
    s.optimizer = std::make_unique<Unsharded>(std::move(opt));
  }
  return s;
}

size_t state_nbytes(const nn::NamedTensors& state) {
  size_t n = 0;
  for (const auto& [name, t] : state) n += t.nbytes();
  return n;
}

}  // namespace engine::parallel
