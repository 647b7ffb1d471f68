// nn/step_graph.h: a training step captured once as a CUDA graph and replayed (--cuda-graph).
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

#include "core/rng.h"
#include "core/tensor.h"

namespace engine::nn {

// The device's side: cuda::Graph (nn/step_graph.cpp) or a test's fake.
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

// What of a run decides whether its step can be captured.
struct StepSettings {
  bool cuda = false;           // the step runs on a GPU
  bool data_parallel = false;  // --mode dp
  int world = 1;
  std::string collectives;  // world > 1: "nccl", or how the host path goes ("ring over shm")
  std::string nonfinite = "stop", optimizer = "sgd", grad_compression = "none";
  bool sync_bn = false, trace = false, profile = false;
  int64_t accumulate = 1, zero = 0;
};

// Why the step cannot be captured ("the device is the CPU", "--nonfinite skip (...)"); "" when
// it can.
std::string step_graph_blocker(const StepSettings& s);

// --cuda-graph auto|on|off against the blocker: whether to capture, and the line rank 0 prints
// ("CUDA graph: off (<reason>)"). on with a blocker is refused (the caller exits 2 naming it).
struct GraphChoice {
  bool on = false;
  bool refused = false;  // --cuda-graph on, and reason says why it cannot be
  std::string reason;    // why off; "" when on
};
GraphChoice choose_step_graph(const std::string& flag, const StepSettings& s);

}  // namespace engine::nn
