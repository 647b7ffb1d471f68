// apps/train/trainer.h: one rank's training run, from a TrainConfig to trained weights.
//
// A Trainer goes through named phases, in this order (run() calls them):
//   connect        the communicator of this rank (none when the job is one process), the ranks
//                  agreeing on their settings (agreement.h), threads
//   build          the dataset, the model on its device, the optimizer (and --init-from)
//   resume         --resume: weights, optimizer state, position and dropout streams
//   distribute     --mode dp: DataParallel over --dp-devices; ddp: CUDA collectives, rank 0's
//                  parameters to every rank, gradient synchronisation
//   run_epoch      the batches of one epoch (from where a resumed run stopped), each one step()
//   step           one training step: forward, loss, backward (buckets reduce as they fill),
//                  wait for the buckets, optimizer step
//   end_epoch      evaluation, the epoch line, --metrics, --checkpoint, --plot
//   finish         --save, --profile, --trace, and a last barrier
// Each phase is where its later features belong: another backend or launcher in connect, an
// elastic restart (the last checkpoint) in resume, an evaluation-only run evaluates as
// end_epoch does (evaluate_only, after resume).
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "apps/train/accumulate.h"
#include "apps/train/config.h"
#include "apps/train/loss_log.h"
#include "apps/train/nonfinite.h"
#include "apps/train/report.h"
#include "apps/train/step_graph.h"
#include "apps/train/zero.h"
#include "comm/communicator.h"
#include "comm/grad_sync.h"
#include "comm/half_grad_sync.h"
#include "comm/powersgd.h"
#include "core/device.h"
#include "core/rng.h"
#include "data/mnist.h"
#include "data/upload.h"
#include "nn/checkpoint.h"
#include "nn/data_parallel.h"
#include "nn/models.h"
#include "nn/optim.h"

namespace engine::apps {

class Trainer {
 public:
  // Checks c (throws engine::Error on values flags alone cannot reject); starts nothing.
  explicit Trainer(const TrainConfig& c);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Every phase in order: trains as configured; prints progress (rank 0), writes metrics,
  // checkpoints and weights. Throws engine::Error on bad input or a failed peer.
  void run();

 private:
  // What one epoch's batches left behind, for end_epoch.
  struct EpochTally {
    double loss_sum = 0;                // this rank's losses
    int64_t batches = 0;                // steps this rank took
    int64_t images = 0;                 // images of every rank
    int64_t next = 0;                   // the batch the epoch would go on with
    int64_t total = 0;                  // batches in the epoch
    double train_s = 0;                 // seconds spent in the batches
    int64_t steps = 0, comm_bytes = 0;  // optimizer steps, bytes their gradient sync sent
    int64_t skipped = 0;                // steps --nonfinite skip skipped
  };

  void connect();
  void build();
  void resume();
  void distribute();
  EpochTally run_epoch(int64_t epoch);
  // One batch of a --accumulate group; the group's last also synchronises and steps. Returns the
  // loss; *took: whether the optimizer stepped (--nonfinite skip may skip it).
  Tensor step(const data::DeviceBatch& b, const MicroBatch& m, bool* took);
  // step() through graph_ (--cuda-graph) when there is one (apps/train/step_graph.cpp).
  Tensor graphed_step(const data::DeviceBatch& b, const MicroBatch& m, bool* took);
  nn::StepSettings graph_settings() const;
  // The seed of loss.backward(): scale (--accumulate's 1/n), NaN when --nonfinite sees a bad loss.
  Tensor backward_seed(const Tensor& loss, float scale);
  void end_epoch(int64_t epoch, const EpochTally& t);
  void finish();
  void print_profile();

  void broadcast_buffers();
  // Bytes the ring schedule sends per rank for this optimizer step's synchronisation.
  int64_t sync_bytes() const;
  EpochResult epoch_result(int64_t epoch, const EpochTally& t);
  // Every rank calls it (mid-epoch the ranks' loss sums travel to rank 0); rank 0 writes.
  void save_checkpoint(int64_t epoch, int64_t batch_in_epoch, double loss_sum);
  std::vector<double> gather_loss_sums(double mine);
  std::string resume_path();
  // --eval-only: the test split on the loaded weights, the test line, nothing trained.
  void evaluate_only();
  bool steps_done() const { return c_.steps > 0 && pos_.step >= c_.steps; }
  // --nonfinite stop|skip: throws naming the first tensor of ts holding inf or NaN (what:
  // "--init-from FILE", "the checkpoint to write at step 12").
  void refuse_nonfinite(const nn::NamedTensors& ts, const std::string& what) const;

  const TrainConfig c_;
  std::unique_ptr<comm::Communicator> comm_;
  int rank_ = 0, world_ = 1, threads_ = 1;
  double flop_per_image_ = 0;  // training work per image, counted in the first step (FlopCount)
  data::Mnist mnist_;
  int64_t batch_ = 0;               // images per rank per step
  std::vector<int64_t> partition_;  // --sharding partition: this rank's shard
  nn::ModelOptions model_options_;
  Generator init_gen_, dropout_gen_;  // the model's dropout layers refer to dropout_gen_
  std::unique_ptr<nn::Model> model_;
  std::vector<Device> dp_devices_;  // --mode dp
  Device device_;                   // where the model lives
  std::unique_ptr<nn::Optimizer> opt_;
  std::unique_ptr<nn::DataParallel> dp_;
  std::unique_ptr<comm::GradSync> sync_;
  std::unique_ptr<comm::PowerSgd> powersgd_;  // --grad-compression powersgd:R
  std::unique_ptr<comm::HalfGradSync> half_;  // --grad-compression bf16 | fp16
  std::unique_ptr<Zero1> zero_;  // --zero 1 on several ranks: it steps, opt_ keeps no state
  std::unique_ptr<NonfiniteGuard> guard_;             // --nonfinite stop|skip; none with off
  std::unique_ptr<TrainStepGraph> graph_;             // --cuda-graph, when on
  std::unique_ptr<data::DeviceDataset> device_data_;  // --data-on-device, when on
  nn::NamedTensors buffers_;                          // broadcast from rank 0 before every step
  std::string resumed_from_;  // the checkpoint this run resumed from; "" when it started fresh
  nn::TrainPosition start_;   // where this run began (--resume; zero otherwise)
  nn::TrainPosition pos_;     // where it is now: pos_.step counts optimizer steps
  std::unique_ptr<MetricsWriter> metrics_;
  Progress progress_;
  LossLog loss_log_;                                   // the epoch's losses, on the device
  std::vector<double> step_loss_;                      // --plot: rank 0's loss per step
  std::vector<std::pair<int64_t, double>> epoch_acc_;  // --plot: (step, test accuracy)
  std::chrono::steady_clock::time_point run_start_;
};

// --optimizer over params.
std::unique_ptr<nn::Optimizer> make_optimizer(const TrainConfig& c, nn::NamedTensors params);

// Trainer(c).run().
void run_training(const TrainConfig& c);

}  // namespace engine::apps
