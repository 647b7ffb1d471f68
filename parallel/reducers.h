// parallel/reducers.h: the gradient reducer and the optimizer of a run, chosen once. The step
// drives them through two interfaces (comm::GradReducer, StepOptimizer) and never asks which
// runs: bucketed, per-parameter or reduce+broadcast averaging, bf16/fp16 compression, PowerSGD,
// ZeRO-1 (an optimizer over shards whose reducer reduce_scatters into them), or, for one
// process, nothing to reduce. Every reducer of comm/ is constructed here and nowhere else.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "comm/grad_reducer.h"
#include "nn/module.h"
#include "nn/optim.h"

namespace engine::parallel {

// Tree: the world-invariant mode's sum over the fixed chunk tree (parallel/tree_reducer.h).
enum class ReducerKind { AllReduce, ReduceBroadcast, Bucketed, Bf16, Fp16, PowerSgd, Zero1, Tree };
// "allreduce", "reduce-broadcast", "bucketed", "bf16", "fp16", "powersgd", "zero1", "tree".
std::string reducer_kind_name(ReducerKind k);
// bf16, fp16 and PowerSGD: the gradients travel compressed.
bool is_compression(ReducerKind k);

struct ReducerOptions {
  ReducerKind kind = ReducerKind::Bucketed;
  size_t bucket_bytes = size_t{25} << 20;  // a bucket's cap (every bucketed reducer and ZeRO-1)
  int powersgd_rank = 1;                   // PowerSGD's R
  int64_t powersgd_start = 100;            // optimizer steps averaged before PowerSGD starts
  uint64_t seed = 0;                       // PowerSGD's first Q, equal on every rank
  bool tree_zero1 = false;  // Tree: the optimizer ZeRO-1's, over shards of the tree's sums
};

enum class OptimizerKind { Sgd, Adam };
struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::Sgd;
  double lr = 0.01;
  double momentum = 0.5;  // SGD's
};
std::unique_ptr<nn::Optimizer> make_optimizer(const OptimizerOptions& o, nn::NamedTensors params);

// What the step steps: an optimizer over the model's parameters, or ZeRO-1's over its shards.
class StepOptimizer {
 public:
  virtual ~StepOptimizer() = default;
  virtual void zero_grad() = 0;
  // After the reducer's finish and a verdict that allows it.
  virtual void step() = 0;
  // A step taken by a replayed CUDA graph (its kernels ran; the host's count did not).
  virtual void count_replayed_step() = 0;
  virtual int64_t steps() const = 0;
  // The tensors whose gradients the non-finite verdict reads once the reducer has finished.
  virtual nn::NamedTensors checked() const = 0;
  // Through which the ranks agree on that verdict when checked() differs between ranks (ZeRO-1's
  // shards); null when the gradients are equal everywhere.
  virtual comm::Communicator* verdict_comm() const = 0;
  // This rank's optimizer state, in bytes (ZeRO-1: its shards').
  virtual size_t state_bytes() const = 0;
  // Every rank calls it: the optimizer a run without sharding would hold, its state whole at
  // rank 0 (what a checkpoint keeps).
  virtual const nn::Optimizer& gathered() = 0;
};

class TreeReducer;

// The run's reducer and optimizer. The reducer is destroyed first (ZeRO-1's refers to the
// optimizer). tree: the reducer when it is the world-invariant mode's (the step hands it each
// micro-batch's chunk partials), else null.
struct Synchronisation {
  std::unique_ptr<StepOptimizer> optimizer;
  std::unique_ptr<comm::GradReducer> reducer;
  TreeReducer* tree = nullptr;
};

// comm: the ranks, or null for one process (a reducer with nothing to do, whatever r.kind, but
// Tree, which folds the chunk tree in the process).
// params: the model's, equal on every rank. opt: the optimizer over params as built (and
// resumed); ZeRO-1 takes its state and steps and shards them.
Synchronisation make_synchronisation(comm::Communicator* comm, nn::NamedTensors params,
                                     const ReducerOptions& r, const OptimizerOptions& o,
                                     std::unique_ptr<nn::Optimizer> opt);

// The state's bytes (optimizer_state_bytes).
size_t state_nbytes(const nn::NamedTensors& state);

}  // namespace engine::parallel
