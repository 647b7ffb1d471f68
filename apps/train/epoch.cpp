// apps/train/epoch.cpp: the Trainer's epoch: its batches, one training step each, then the end of
// the epoch (evaluation, the epoch line, metrics, checkpoint, plot).
#include <cstdio>
#include <optional>

#include "apps/train/trainer.h"
#include "core/autograd.h"
#include "core/sync_guard.h"
#include "core/trace.h"
#include "data/loader.h"
#include "data/sampler.h"
#include "nn/functional.h"
#include "nn/report/progress.h"
#include "nn/report/training_plot.h"

namespace engine::apps {
namespace {

using Clock = std::chrono::steady_clock;

Tensor images_tensor(const data::Batch& b, Device dev) {
  return Tensor::from_vector(b.images, {b.size, 1, b.rows, b.cols}, dev);
}

// Mean loss and accuracy on the test split. Each rank evaluates its 1/W slice without autograd;
// the sums meet in one all_reduce.
void evaluate(nn::Model& model, const data::MnistSplit& test, comm::Communicator* comm, Device dev,
              EpochResult* r) {
  NoGradGuard ng;
  model.eval();
  const int world = comm ? comm->size() : 1, rank = comm ? comm->rank() : 0;
  const int64_t begin = test.count * rank / world, end = test.count * (rank + 1) / world;
  constexpr int64_t kChunk = 1000;
  double loss_sum = 0;
  int64_t correct = 0;
  for (int64_t b = begin; b < end; b += kChunk) {
    data::Batch batch = data::contiguous_batch(test, b, std::min(end, b + kChunk));
    Tensor labels = Tensor::from_vector_i64(batch.labels, {batch.size}, dev);
    Tensor scores = model.forward(images_tensor(batch, dev));
    loss_sum += model.loss(scores, labels).item() * static_cast<double>(batch.size);
    correct += nn::correct_count(scores, labels);
  }
  model.train();
  if (comm) {
    float l = static_cast<float>(loss_sum);
    comm->all_reduce(&l, 1, DType::F32, comm::ReduceOp::Sum);
    comm->all_reduce(&correct, 1, DType::I64, comm::ReduceOp::Sum);
    loss_sum = l;
  }
  r->test_count = test.count;
  r->test_correct = correct;
  r->test_loss = test.count ? loss_sum / static_cast<double>(test.count) : 0;
  r->test_acc = test.count ? static_cast<double>(correct) / static_cast<double>(test.count) : 0;
}

// This rank's sample indices for an epoch.
std::vector<int64_t> epoch_indices(const TrainConfig& c, int64_t n, int world, int rank,
                                   int64_t epoch, const std::vector<int64_t>& partition) {
  if (c.sharding == "partition") return partition;
  data::DistributedSampler sampler(n, world, rank, c.shuffle == "on", static_cast<uint64_t>(c.seed),
                                   c.drop_last);
  sampler.set_epoch(epoch);
  return sampler.indices();
}

}  // namespace

Trainer::EpochTally Trainer::run_epoch(int64_t epoch) {
  const int64_t first = epoch == start_.epoch ? start_.batch_in_epoch : 0;
  // Partition: one loader, its shard reshuffled per epoch (seeded by seed, epoch and rank).
  // Sampler: the sampler orders the epoch; the loader keeps that order.
  data::BatchLoader loader(mnist_.train,
                           epoch_indices(c_, mnist_.train.count, world_, rank_, epoch, partition_),
                           batch_, c_.sharding == "partition" && c_.shuffle == "on",
                           /*drop_last=*/false, static_cast<uint64_t>(c_.seed), rank_);
  data::BatchUploader uploader(dp_ ? Device::cpu() : device_, batch_, mnist_.train.rows,
                               mnist_.train.cols, device_data_.get());
  loader.set_indices_only(device_data_ != nullptr);  // --data-on-device: the device gathers
  loader.start_epoch(epoch);
  data::Batch b;
  for (int64_t i = 0; i < first && loader.next(&b); ++i) {
  }  // batches a resumed run has already trained on
  EpochTally t;
  t.total = loader.batches_per_epoch();
  if (first > 0 && start_.epoch_loss_sums.size() == static_cast<size_t>(world_)) {
    t.loss_sum = start_.epoch_loss_sums[rank_];  // the epoch line stays the whole epoch's mean
    t.batches = first;
  }
  loss_log_.start(t.loss_sum);
  // Reads what the steps recorded on the device (outside the steps: at a progress line, a
  // checkpoint and the epoch's end): the loss sum, --plot's per-step losses, --nonfinite stop's
  // queued scans. Returns the last step's loss.
  auto read_losses = [&] {
    const std::vector<double> ls = loss_log_.read();
    if (guard_) guard_->check_pending();
    if (!c_.plot.empty()) step_loss_.insert(step_loss_.end(), ls.begin(), ls.end());
    t.loss_sum = loss_log_.sum();
    return loss_log_.last();
  };
  progress_.start_epoch(
      epoch, first,
      nn::progress_end(t.total, first, c_.steps > 0 ? (c_.steps - pos_.step) * c_.accumulate : -1));
  const auto start = Clock::now();
  // The next batch is staged (on a GPU: uploading on the copy stream) before this one computes.
  auto stage_next = [&]() -> int {
    trace::Scope ts("data", "data");
    return loader.next(&b) ? uploader.stage(b) : -1;
  };
  int staged = stage_next();
  for (t.next = first; staged >= 0 && !steps_done(); ++t.next) {
    data::DeviceBatch cur = uploader.take(staged);
    staged = stage_next();
    trace::Scope step_scope("step", "step");
    const MicroBatch m = micro_batch(t.next, t.total, c_.accumulate);
    bool took = true;
    {
      sync_guard::StepScope in_step;  // ENGINE_SYNC_GUARD=1: no host read until it ends
      const Tensor loss = graphed_step(cur, m, &took);
      loss_log_.record(loss);
      if (guard_) guard_->queue_scan(loss);  // after a replay too: never inside the graph
    }
    uploader.done(cur.slot);
    if (!took) ++t.skipped;
    ++t.batches;
    t.images += cur.size * world_;
    if (m.last) {
      ++t.steps;
      t.comm_bytes += sync_bytes();
    }
    progress_.update(t.next, read_losses, cur.size * world_);
    // --checkpoint-every K; the epoch's last step and the run's are checkpointed by end_epoch.
    if (m.last && took && c_.checkpoint_every > 0 && pos_.step % c_.checkpoint_every == 0 &&
        t.next + 1 < t.total && !steps_done()) {
      read_losses();
      save_checkpoint(epoch, t.next + 1, t.loss_sum);
    }
  }
  read_losses();
  t.train_s = std::chrono::duration<double>(Clock::now() - start).count();
  progress_.finish();
  return t;
}

// One training step on this rank's batch (docs/design.md, "One training step"):
//   batch -> model.forward -> loss -> backward: each parameter's grad ready -> hook -> its bucket
//   full -> comm thread: allreduce (avg) -> wait for all buckets -> optimizer.step
Tensor Trainer::backward_seed(const Tensor& loss, float scale) {
  if (!guard_) return scale == 1.0f ? Tensor() : Tensor::full(loss.shape(), scale, loss.device());
  Tensor seed = guard_->seed(loss);     // 1, or NaN for a non-finite loss: every gradient NaN
  if (scale != 1.0f) seed.mul_(scale);  // d(scale * loss) = scale * d(loss)
  return seed;
}

// Under --accumulate K the group's first K-1 batches stop after backward (their gradients add up,
// no collective, as DDP's no_sync()); the last synchronises the sum and steps.
Tensor Trainer::step(const data::DeviceBatch& b, const MicroBatch& m, bool* took) {
  *took = true;
  if (m.first) {
    opt_->zero_grad();
    broadcast_buffers();
  }
  Tensor loss;
  {
    trace::Scope ts("forward", "forward");
    std::optional<nn::FlopCount> count;  // the first step counts the work per image
    if (flop_per_image_ == 0 && b.images.size(0) > 0) count.emplace();
    Tensor scores = dp_ ? dp_->forward(b.images) : (*model_)(b.images);
    loss = model_->loss(scores, b.labels.to(scores.device()));
    if (count) flop_per_image_ = static_cast<double>(count->total()) / b.images.size(0);
  }
  if (sync_ && m.last) sync_->begin();
  {
    trace::Scope ts("backward", "backward");
    loss.backward(backward_seed(loss, m.scale));
  }
  if (dp_) dp_->reduce_gradients();  // --mode dp: the replicas' gradients into the module's
  if (!m.last) return loss;
  if (zero_) {
    // --nonfinite: each rank scans its shards of the averaged gradients; the ranks agree.
    zero_->step([&] { return !guard_ || (*took = guard_->allow_step(pos_.step + 1, loss)); });
    if (!*took) return loss;  // --nonfinite skip: on every rank alike, parameters unchanged
  } else {
    if (sync_) sync_->finish();  // every bucket reduced
    if (powersgd_) powersgd_->reduce(pos_.step);
    if (half_) half_->reduce();
    if (guard_) {
      trace::Scope ts("nonfinite check", "optimizer");
      *took = guard_->allow_step(pos_.step + 1, loss);
    }
    if (!*took) return loss;  // --nonfinite skip: on every rank alike
    trace::Scope ts("optimizer", "optimizer");
    opt_->step();
  }
  ++pos_.step;
  return loss;
}

int64_t Trainer::sync_bytes() const {
  if (!comm_) return 0;
  if (zero_) return zero_->bytes_per_step();
  if (powersgd_) return powersgd_->bytes_per_step(pos_.step - 1);  // the step just taken
  if (half_) return half_->bytes_per_step();
  int64_t count = 0;
  for (const auto& [name, p] : model_->named_parameters()) count += p.numel();
  return 2 * (world_ - 1) * count * 4 / world_;
}

// As DDP (broadcast_buffers=True): rank 0's BatchNorm statistics go to every rank.
void Trainer::broadcast_buffers() {
  if (!comm_ || buffers_.empty() || c_.sync_bn) return;  // --sync-bn: equal everywhere
  trace::Scope ts("broadcast buffers", "comm");
  comm::broadcast_tensors(*comm_, buffers_, 0);
}

void Trainer::end_epoch(int64_t epoch, const EpochTally& t) {
  EpochResult r = epoch_result(epoch, t);
  epoch_acc_.emplace_back(r.step, r.test_acc);
  r.wall_s = std::chrono::duration<double>(Clock::now() - run_start_).count();
  if (rank_ == 0) print_epoch(rank_, r);
  if (metrics_) metrics_->write(r);
  const bool epoch_done = t.next >= t.total;
  save_checkpoint(epoch_done ? epoch + 1 : epoch, epoch_done ? 0 : t.next, t.loss_sum);
  if (rank_ == 0 && !c_.plot.empty())
    nn::write_training_plot(c_.plot, step_loss_, epoch_acc_,
                            c_.model + ", world " + std::to_string(world_));
}

// The epoch line's figures: the mean training loss over all ranks, and the test split's.
EpochResult Trainer::epoch_result(int64_t epoch, const EpochTally& t) {
  EpochResult r;
  r.epoch = epoch;
  r.step = pos_.step;
  double loss_sum = t.loss_sum;
  int64_t batches = t.batches;
  if (comm_) {
    float sums[2] = {static_cast<float>(loss_sum), static_cast<float>(batches)};
    comm_->all_reduce(sums, 2, DType::F32, comm::ReduceOp::Sum);
    loss_sum = sums[0];
    batches = static_cast<int64_t>(sums[1]);
  }
  r.train_loss = batches ? loss_sum / static_cast<double>(batches) : 0;
  r.images_per_s = t.train_s > 0 ? static_cast<double>(t.images) / t.train_s : 0;
  r.train_flop_per_image = flop_per_image_;
  r.precision = c_.precision;
  r.skipped_steps = t.skipped;
  r.comm_bytes_per_step = t.steps ? static_cast<double>(t.comm_bytes) / t.steps : 0;
  r.optimizer_state_bytes =
      static_cast<int64_t>(zero_ ? zero_->state_bytes() : state_nbytes(opt_->state()));
  trace::Scope ts("evaluate", "eval");
  evaluate(*model_, mnist_.test, comm_.get(), device_, &r);
  return r;
}

// Every rank's loss sum (bit for bit) at rank 0; other ranks get an empty vector.
std::vector<double> Trainer::gather_loss_sums(double mine) {
  static_assert(sizeof(double) == sizeof(int64_t), "doubles travel as I64");
  if (!comm_) return {mine};
  std::vector<double> all(rank_ == 0 ? world_ : 0);
  comm_->gather(&mine, rank_ == 0 ? all.data() : nullptr, 1, DType::I64, 0);
  return all;
}

// Rank 0 writes --checkpoint: the position to go on from and every generator's state; mid-epoch
// also every rank's loss sum so far.
void Trainer::save_checkpoint(int64_t epoch, int64_t batch_in_epoch, double loss_sum) {
  if (c_.checkpoint.empty()) return;
  refuse_nonfinite(model_->state_dict(), "--checkpoint " + c_.checkpoint + " at step " +
                                             std::to_string(pos_.step) + ": not written");
  std::vector<double> sums;
  if (batch_in_epoch > 0) sums = gather_loss_sums(loss_sum);
  nn::NamedTensors zero_state;  // --zero 1: every rank's shards, at rank 0
  pos_.comm_state = powersgd_ ? powersgd_->gather_state() : nn::NamedTensors{};
  if (zero_) zero_state = zero_->gather_state();
  if (rank_ != 0) return;
  pos_.epoch_loss_sums = std::move(sums);
  pos_.epoch = epoch;
  pos_.batch_in_epoch = batch_in_epoch;
  pos_.init_seed = static_cast<uint64_t>(c_.seed);
  pos_.dropout_seed = dropout_gen_.seed();
  pos_.dropout_offset = dropout_gen_.offset();
  pos_.model = c_.model;
  // The other replicas' dropout streams, for a bit-exact resume of --mode dp.
  pos_.replica_dropout_offsets = dp_ ? dp_->replica_dropout_offsets() : std::vector<uint64_t>{};
  if (!zero_) return nn::save_training_checkpoint(c_.checkpoint, *model_, *opt_, pos_);
  std::unique_ptr<nn::Optimizer> full = make_optimizer(c_, model_->named_parameters());
  full->load_state(zero_state, zero_->steps());  // the file an unsharded run would write
  nn::save_training_checkpoint(c_.checkpoint, *model_, *full, pos_);
}

void Trainer::evaluate_only() {
  EpochResult r;
  evaluate(*model_, mnist_.test, comm_.get(), device_, &r);
  if (rank_ == 0) {
    std::printf("Evaluation only: %s weights from %s, %d rank(s)\n", c_.model.c_str(),
                resumed_from_.empty() ? c_.init_from.c_str() : resumed_from_.c_str(), world_);
    print_test_line(r);
  }
  if (rank_ == 0 && !c_.save.empty()) nn::save_state_dict(c_.save, *model_);
  if (comm_) comm_->barrier();
}

}  // namespace engine::apps
