// apps/train/options.h: train's flags (TrainConfig) as the parallel layer's typed options, what
// its ranks compare before they start (parallel/agreement.h compares them), and that layer's
// refusals worded with the flags that chose what was refused.
#pragma once
#include <string>
#include <vector>

#include "apps/train/config.h"
#include "core/device.h"
#include "nn/checkpoint_check.h"
#include "parallel/agreement.h"
#include "parallel/cuda_collectives.h"
#include "parallel/nonfinite.h"
#include "parallel/reducers.h"
#include "parallel/step_graph.h"

namespace engine::apps {

parallel::OptimizerOptions optimizer_options(const TrainConfig& c);
parallel::ReducerOptions reducer_options(const TrainConfig& c);
parallel::NonfiniteMode nonfinite_mode(const TrainConfig& c);
parallel::CudaCollectiveOptions collective_options(const TrainConfig& c);
// "auto" | "on" | "off" (ENGINE_CUDA_GRAPH, ENGINE_DATA_ON_DEVICE).
parallel::AutoOnOff auto_on_off(const std::string& v);

// What decides whether train's step can be captured. collectives: "" for one rank, else how
// they go ("nccl", "mpi", "ring over shm").
parallel::StepSettings step_settings(const TrainConfig& c, Device dev, int world,
                                     const std::string& collectives);
// Why the step stays eager, naming the flag that keeps it so ("--accumulate 4: two kinds of
// step (without and with the optimizer)").
std::string graph_reason(const parallel::GraphChoice& g, const TrainConfig& c);
// A refusal of parallel::attach_cuda_collectives, naming the flag to change ("--backend nccl
// reduces CUDA tensors and this rank trains on the cpu (...): use --backend ring").
std::string collectives_refusal(const parallel::CollectivesRefused& e, int rank);
// Flags that change only this rank's own behaviour (where it reads or writes files, how many
// threads, how long it waits, what it reports): they may differ between ranks. --data-dir is
// here because the data itself is compared (data_settings). docs/training.md lists the same.
const std::vector<std::string>& rank_local_flags();
// Every train flag (declare_train_flags) but the rank-local ones, with its value in c, in
// declaration order (a flag declared later is compared without further work), then the ENGINE_*
// variables that change the numbers or the collectives, under their names.
std::vector<parallel::Setting> config_settings(const TrainConfig& c);

// A checkpoint refused for a setting of this run, naming the flag ("this run's --seed is 7").
std::string resume_refusal(const nn::ResumeMismatch& e);

}  // namespace engine::apps
