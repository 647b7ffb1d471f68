// apps/train/trainer.h: one rank's training run, from a TrainConfig to trained weights.
//
// A Trainer goes through named phases, in this order (run() calls them):
//   connect        the communicator of this rank (none when the job is one process), the ranks
//                  agreeing on their settings (options.h), threads
//   build          the dataset, the model on its device, the optimizer (and --init-from)
//   resume         --resume: weights, optimizer state, position and dropout streams
//   distribute     --mode dp: DataParallel over --dp-devices; ddp: CUDA collectives, rank 0's
//                  parameters to every rank; the step (parallel/train_step.h) with its reducer
//   run_epoch      the batches of one epoch (from where a resumed run stopped), each one step
//   end_epoch      evaluation, the epoch line, --metrics, --checkpoint, --plot
//   finish         --save, --profile, --trace, and a last barrier
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "apps/train/config.h"
#include "comm/communicator.h"
#include "core/device.h"
#include "core/rng.h"
#include "data/device_data.h"
#include "data/mnist.h"
#include "nn/checkpoint.h"
#include "nn/data_parallel.h"
#include "nn/models.h"
#include "nn/optim.h"
#include "parallel/elastic.h"
#include "parallel/loss_log.h"
#include "parallel/sharding.h"
#include "parallel/straggler.h"
#include "parallel/train_step.h"
#include "report/train_report.h"

namespace engine::apps {

using report::EpochResult;
using report::MetricsWriter;
using report::Progress;

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
  // agree, build, resume and distribute; with --on-rank-loss continue, again among the others
  // when a rank is lost before the first step (nothing to hand over yet).
  void set_up();
  void enter_job();  // --on-rank-loss continue: a member of generation 0, or a newcomer
  // A rank lost before the first step: the others (g, regrouped) start without it.
  void start_without(parallel::Regrouped g);
  void build();
  void shard_data();  // shard_ and batch_ for this rank of world_
  void resume();
  void distribute();
  // How CUDA tensors travel (parallel/cuda_collectives.h), its refusals worded with the flags.
  std::string attach_collectives();
  void print_world(const std::string& cuda_path) const;
  // ENGINE_CUDA_GRAPH and ENGINE_DATA_ON_DEVICE: the choice, and the line rank 0 prints.
  void choose_gpu_step();
  // The epochs from start_, then finish; with --on-rank-loss continue, after a lost rank, again
  // from the last completed step among the survivors; and with the newcomers admitted.
  void train();
  // A membership change: after a lost rank (the survivors regroup) or to admit newcomers; every
  // member takes the furthest one's state (parallel/elastic.h).
  void change_membership(bool admission);
  // A newcomer (enter_job) takes the members' state: false when the job finished first.
  bool arrive();
  void adopt(parallel::Elastic::Handover h);  // the new generation's communicator and position
  // --on-rank-loss continue: where a regroup goes on from, kept at every step boundary; throws
  // parallel::Admission when the members admit newcomers there.
  void keep_boundary(int64_t epoch, int64_t batch_in_epoch);
  // The ranks score who made them wait (parallel/straggler.h); rank 0 names a rank that stands
  // out, and says when it no longer does.
  enum class Watch { Begin, Step, End };  // of the epoch
  void watch_stragglers(Watch w);
  // An epoch that starts at batch `first` of `total`: a resumed one's loss so far.
  EpochTally begin_tally(int64_t first, int64_t total);
  EpochTally run_epoch(int64_t epoch);
  void end_epoch(int64_t epoch, const EpochTally& t);
  void finish();
  void print_profile();

  EpochResult epoch_result(int64_t epoch, const EpochTally& t);
  // Every rank calls it (mid-epoch the ranks' loss sums travel to rank 0); rank 0 writes.
  void save_checkpoint(int64_t epoch, int64_t batch_in_epoch, double loss_sum);
  // pos_ as a checkpoint writes it: where the run goes on from, every generator's state.
  void set_position(int64_t epoch, int64_t batch_in_epoch, std::vector<double> sums);
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
  data::Mnist mnist_;
  int64_t batch_ = 0;          // images per rank per step
  parallel::RankShard shard_;  // --sharding: this rank's samples
  nn::ModelOptions model_options_;
  Generator init_gen_, dropout_gen_;  // the model's dropout layers refer to dropout_gen_
  std::unique_ptr<nn::Model> model_;
  std::vector<Device> dp_devices_;      // --mode dp
  Device device_;                       // where the model lives
  std::unique_ptr<nn::Optimizer> opt_;  // as built and resumed; then the step's (distribute)
  std::unique_ptr<nn::DataParallel> dp_;
  std::unique_ptr<parallel::TrainStep> step_;
  std::unique_ptr<data::DeviceDataset> device_data_;  // ENGINE_DATA_ON_DEVICE, when on
  std::string resumed_from_;  // the checkpoint this run resumed from; "" when it started fresh
  nn::TrainPosition start_;   // where this run began (--resume; zero otherwise)
  nn::TrainPosition pos_;     // where it is now: pos_.step counts optimizer steps
  std::unique_ptr<MetricsWriter> metrics_;
  Progress progress_;
  parallel::LossLog loss_log_;                         // the epoch's losses, on the device
  std::vector<double> step_loss_;                      // --plot: rank 0's loss per step
  std::vector<std::pair<int64_t, double>> epoch_acc_;  // --plot: (step, test accuracy)
  std::chrono::steady_clock::time_point run_start_;
  parallel::StragglerWatch straggler_;
  std::unique_ptr<parallel::Elastic> elastic_;  // --on-rank-loss continue
  parallel::StepBoundary boundary_;
  bool redo_epoch_end_ = false;  // a regroup came during the end of a run cut by --steps
  bool newcomer_ = false;        // this process joins a running job
};

// Trainer(c).run().
void run_training(const TrainConfig& c);

}  // namespace engine::apps
