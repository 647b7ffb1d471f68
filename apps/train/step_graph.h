// apps/train/step_graph.h: train's GPU step options. --cuda-graph: the run's settings as
// nn::StepSettings, the line rank 0 prints, the captured step's static inputs (nn/step_graph.h
// holds the policy). --data-on-device: the choice and the uploaded split (data/device_data.h).
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "apps/train/config.h"
#include "core/device.h"
#include "core/rng.h"
#include "data/device_data.h"
#include "data/upload.h"
#include "nn/step_graph.h"

namespace engine::apps {

// What decides whether train's step can be captured. collectives: "" for one rank, else how
// they go ("nccl", "mpi", "ring over shm").
nn::StepSettings step_settings(const TrainConfig& c, Device dev, int world,
                               const std::string& collectives);

// The batch each replay reads, at fixed addresses: every step's batch is copied in first.
class TrainStepGraph {
 public:
  using Step = std::function<Tensor(const data::DeviceBatch&)>;
  TrainStepGraph(std::unique_ptr<nn::GraphBackend> backend, Device dev, int64_t batch, int64_t rows,
                 int64_t cols, Generator* dropout, bool say);

  // b's step: eager (warm-up, a short batch), captured once, or replayed; step is the trainer's
  // step on a batch, after_replay its host bookkeeping for a replayed step.
  Tensor run(const data::DeviceBatch& b, const Step& step,
             const std::function<void()>& after_replay);

 private:
  nn::StepGraph graph_;
  data::DeviceBatch inputs_;
  bool say_;  // rank 0 prints "CUDA graph: on (...)" once captured
};

// --cuda-graph: nullptr when off (rank 0 prints why, unless the flag said off). Throws
// UsageError for --cuda-graph on where the step cannot be captured.
std::unique_ptr<TrainStepGraph> make_train_step_graph(const TrainConfig& c,
                                                      const nn::StepSettings& s, int rank,
                                                      Device dev, int64_t batch, int64_t rows,
                                                      int64_t cols, Generator* dropout);

// --data-on-device: the training split on dev, or nullptr when off (rank 0 prints why, unless
// the flag said off). Throws UsageError for --data-on-device on where it cannot be.
std::unique_ptr<data::DeviceDataset> make_device_data(const TrainConfig& c,
                                                      const data::MnistSplit& train, Device dev,
                                                      bool data_parallel, int rank);

// The eager steps before the capture (cuDNN's choice, lazy loading, persistent buffers).
constexpr int kGraphWarmupSteps = 3;

}  // namespace engine::apps
