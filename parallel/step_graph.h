// parallel/step_graph.h: a training step captured once as a CUDA graph and replayed, and the
// policy of whether a run's step can be (the step graph in one place).
//
// The policy, apart from CUDA so that the CPU tests run it behind a recording fake:
//   - steps of another batch size than the graph's (the epoch's short last batch) run eagerly;
//   - the first `warmup` full steps run eagerly (cuDNN's algorithm choice, lazy module loading,
//     persistent buffers such as momentum allocated at their final addresses);
//   - the next full step is captured: its batch is copied into the graph's static inputs, the
//     step queued once while the device records it (allocations from the graph's private pool,
//     core/block_pool.h), the graph instantiated and launched;
//   - every later full step copies its batch into the static inputs and replays the graph, then
//     runs the step's host bookkeeping (counters) that the replay cannot.
// The replay writes the captured step's outputs (the loss) into the same storage each time.
// Dropout under a graph reads its Philox offset on the device (kernels/dropout.h): before each
// launch the generator's offset is written there and the generator advanced by what the captured
// step reserves, so replays draw the masks eager steps would.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/device.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "data/device_data.h"
#include "data/upload.h"
#include "parallel/nonfinite.h"
#include "parallel/reducers.h"

namespace engine::parallel {

// The device's side: cuda::Graph (parallel/step_graph.cpp) or a test's fake.
class GraphBackend {
 public:
  virtual ~GraphBackend() = default;
  virtual void begin() = 0;
  virtual void end() = 0;
  virtual void abort() noexcept = 0;
  virtual void replay() = 0;
  // The device counter dropout kernels read under the graph; set_dropout_base queues a write.
  virtual const uint64_t* dropout_base() = 0;
  virtual void set_dropout_base(uint64_t offset) = 0;
};

// cuda::Graph on cuda:device, with an 8-byte device counter for dropout.
std::unique_ptr<GraphBackend> make_cuda_graph_backend(int device);

// The parts of one step, supplied by the trainer.
struct StepParts {
  std::function<Tensor()> eager;       // the step on this batch, as usual
  std::function<void()> load_inputs;   // queues this batch's copy into the static inputs
  std::function<Tensor()> on_inputs;   // the step on the static inputs (run once, captured)
  std::function<void()> after_replay;  // host bookkeeping of a replayed step
};

enum class StepRun { Eager, Captured, Replayed };

class StepGraph {
 public:
  // batch: the full batch size (other sizes run eagerly); dropout: the generator of the step's
  // dropout layers (null when it has none).
  StepGraph(std::unique_ptr<GraphBackend> backend, int64_t batch, int warmup, Generator* dropout);

  // One step of `size` images: returns its loss (under the graph: the graph's loss tensor,
  // rewritten by each replay). Throws engine::Error when the capture fails (no step was taken).
  Tensor run(int64_t size, const StepParts& parts);

  StepRun last() const { return last_; }
  bool captured() const { return captured_; }
  int warmup() const { return warmup_; }
  int64_t replays() const { return replays_; }

 private:
  Tensor capture(const StepParts& parts);

  std::unique_ptr<GraphBackend> backend_;
  int64_t batch_;
  int warmup_, warm_ = 0;
  Generator* dropout_;
  bool captured_ = false;
  uint64_t dropout_per_step_ = 0;  // Philox counters the captured step reserves
  int64_t replays_ = 0;
  StepRun last_ = StepRun::Eager;
  Tensor loss_;  // the graph's output
};

// The batch each replay reads, at fixed addresses: every step's batch is copied in first.
class TrainStepGraph {
 public:
  using Step = std::function<Tensor(const data::DeviceBatch&)>;
  TrainStepGraph(std::unique_ptr<GraphBackend> backend, Device dev, int64_t batch, int64_t rows,
                 int64_t cols, Generator* dropout);

  // b's step: eager (warm-up, a short batch), captured once, or replayed; step is the training
  // step on a batch, after_replay its host bookkeeping for a replayed step.
  Tensor run(const data::DeviceBatch& b, const Step& step,
             const std::function<void()>& after_replay);
  StepRun last() const { return graph_.last(); }
  int warmup() const { return graph_.warmup(); }

 private:
  StepGraph graph_;
  data::DeviceBatch inputs_;
};

// The eager steps before the capture (cuDNN's choice, lazy loading, persistent buffers).
constexpr int kGraphWarmupSteps = 3;

// A choice the run makes or is told: auto where it can be (capture the step, upload the data),
// on (refused where it cannot), off.
enum class AutoOnOff { Auto, On, Off };

// What of a run decides whether its step can be captured.
struct StepSettings {
  bool cuda = false;           // the step runs on a GPU
  bool data_parallel = false;  // one process drives several devices (nn::DataParallel)
  int world = 1;
  std::string collectives;  // world > 1: "nccl", or how the host path goes ("ring over shm")
  NonfiniteMode nonfinite = NonfiniteMode::Stop;
  OptimizerKind optimizer = OptimizerKind::Sgd;
  ReducerKind reducer = ReducerKind::Bucketed;  // compression and ZeRO-1 work on the host
  bool sync_bn = false, trace = false, profile = false;
  int64_t accumulate = 1;
};

// Which setting keeps the step eager (None: it can be captured).
enum class GraphBlocker {
  None,
  Off,              // the mode says off
  Cpu,              // the device is the CPU
  DataParallel,     // one process, several devices
  HostCollectives,  // the collectives go through the host
  Accumulate,       // two kinds of step
  NonfiniteSkip,    // the host decides each step
  SyncBn,           // its all_reduce goes through the host
  Compression,      // host work each step
  Zero,             // the shards' collectives
  Optimizer,        // Adam's step count is a launch argument
  Trace,            // per-op host timing
  Profile,          // per-op host timing
  Untried,          // auto: collectives inside a captured step have not run on a GPU yet
};

// Whether to capture, and why not, in words without the app's flags: `subject` names the setting
// ("gradient accumulation over 4 batches"; "" where `why` says it all), `why` what stops the
// capture. The app names its own flag in place of the subject.
struct GraphChoice {
  bool on = false;
  bool refused = false;  // AutoOnOff::On, and the step cannot be captured
  GraphBlocker blocker = GraphBlocker::None;
  std::string subject, why;
  std::string reason() const { return subject.empty() ? why : subject + ": " + why; }
};

// The blocker of s alone (the mode aside); blocker None when the step can be captured.
GraphChoice step_graph_blocker(const StepSettings& s);
GraphChoice choose_step_graph(AutoOnOff mode, const StepSettings& s);

// The data on the device: the training split uploaded once and each batch gathered there. `data`
// is null when off; choice.reason says why (when data_parallel: the batch is cut on the host).
struct DeviceData {
  std::unique_ptr<data::DeviceDataset> data;
  data::DataOnDeviceChoice choice;
  size_t nbytes = 0;  // the split's bytes on the device
};
DeviceData make_device_data(AutoOnOff mode, const data::MnistSplit& train, Device dev,
                            bool data_parallel);

}  // namespace engine::parallel
