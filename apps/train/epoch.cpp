// apps/train/epoch.cpp: the Trainer's epoch: its batches, one training step each, then the end of
// the epoch (evaluation, the epoch line, metrics, checkpoint, plot).
#include <cstdio>

#include "apps/train/trainer.h"
#include "core/trace.h"
#include "data/loader.h"
#include "parallel/accumulate.h"
#include "parallel/evaluate.h"
#include "report/progress.h"
#include "report/training_plot.h"

namespace engine::apps {
namespace {

using Clock = std::chrono::steady_clock;

// The test split's figures on every rank, into r.
void evaluate(nn::Model& model, const data::MnistSplit& test, comm::Communicator* comm, Device dev,
              bool world_invariant, EpochResult* r) {
  const parallel::TestResult t = parallel::evaluate(model, test, comm, dev, world_invariant);
  r->test_count = t.count;
  r->test_correct = t.correct;
  r->test_loss = t.loss;
  r->test_acc = t.accuracy;
}

}  // namespace

Trainer::EpochTally Trainer::begin_tally(int64_t first, int64_t total) {
  EpochTally t;
  t.total = total;
  if (const double* sum = first > 0 ? parallel::resumed_loss_sum(start_.epoch_loss_sums,
                                                                 c_.world_invariant, world_, rank_)
                                    : nullptr) {
    t.loss_sum = *sum;  // the epoch line stays the whole epoch's mean
    t.batches = first;
  }
  loss_log_.start(t.loss_sum);
  watch_stragglers(Watch::Begin);
  return t;
}

Trainer::EpochTally Trainer::run_epoch(int64_t epoch) {
  const int64_t first = epoch == start_.epoch ? start_.batch_in_epoch : 0;
  // Partition: one loader, its shard reshuffled per epoch (seeded by seed, epoch and rank).
  // Sampler: the sampler orders the epoch; the loader keeps that order.
  data::BatchLoader loader(mnist_.train, shard_.indices(epoch), batch_, shard_.loader_shuffles(),
                           /*drop_last=*/false, static_cast<uint64_t>(c_.seed), rank_);
  data::BatchUploader uploader(dp_ ? Device::cpu() : device_, batch_, mnist_.train.rows,
                               mnist_.train.cols, device_data_.get());
  loader.set_indices_only(device_data_ != nullptr);  // data on the device: it gathers
  loader.start_epoch(epoch);
  data::Batch b;
  for (int64_t i = 0; i < first && loader.next(&b);) ++i;  // batches a resumed run trained on
  EpochTally t = begin_tally(first, loader.batches_per_epoch());
  keep_boundary(epoch, first);
  // Reads what the steps recorded on the device (outside the steps: at a progress line, a
  // checkpoint and the epoch's end): the loss sum, --plot's per-step losses, --nonfinite stop's
  // queued scans. Returns the last step's loss.
  auto read_losses = [&] {
    const std::vector<double> ls = loss_log_.read();
    step_->guard().check_pending();
    if (!c_.plot.empty()) step_loss_.insert(step_loss_.end(), ls.begin(), ls.end());
    t.loss_sum = loss_log_.sum();
    return loss_log_.last();
  };
  progress_.start_epoch(
      epoch, first,
      report::progress_end(t.total, first,
                           c_.steps > 0 ? (c_.steps - pos_.step) * c_.accumulate : -1));
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
    parallel::MicroBatch m = parallel::micro_batch(t.next, t.total, c_.accumulate);
    m.chunks = shard_.plan(t.next);  // world-invariant: this rank's chunks of the global batch
    bool took = true;
    loss_log_.record(step_->run(cur, m, &took));
    pos_.step = step_->steps();
    if (rank_ == 0 && step_->last_run() == parallel::StepRun::Captured) {
      std::printf("CUDA graph: on (captured after %d warm-up steps)\n",
                  parallel::kGraphWarmupSteps);
      std::fflush(stdout);
    }
    uploader.done(cur.slot);
    if (m.last) keep_boundary(epoch, t.next + 1);  // accumulating: only whole optimizer steps
    if (!took) ++t.skipped;
    ++t.batches;
    const int64_t images = c_.world_invariant ? c_.batch_size : cur.size * world_;  // all ranks'
    t.images += images;
    if (m.last) {
      ++t.steps;
      t.comm_bytes += step_->last_step_bytes();
      watch_stragglers(Watch::Step);
    }
    progress_.update(t.next, read_losses, images);
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
  watch_stragglers(Watch::End);
  return t;
}

void Trainer::watch_stragglers(Watch w) {
  if (!comm_) return;
  if (w == Watch::Begin) return straggler_.begin_epoch(*comm_);
  const std::string line = straggler_.step(*comm_, w == Watch::End);
  if (rank_ == 0 && !line.empty()) std::printf("%s\n", line.c_str());
}

void Trainer::end_epoch(int64_t epoch, const EpochTally& t) {
  EpochResult r = epoch_result(epoch, t);
  epoch_acc_.emplace_back(r.step, r.test_acc);
  r.wall_s = std::chrono::duration<double>(Clock::now() - run_start_).count();
  if (rank_ == 0) report::print_epoch(rank_, r);
  if (metrics_) metrics_->write(r);
  const bool epoch_done = t.next >= t.total;
  save_checkpoint(epoch_done ? epoch + 1 : epoch, epoch_done ? 0 : t.next, t.loss_sum);
  if (rank_ == 0 && !c_.plot.empty())
    report::write_training_plot(c_.plot, step_loss_, epoch_acc_,
                                c_.model + ", world " + std::to_string(world_));
}

// The epoch line's figures: the mean training loss over all ranks, and the test split's.
EpochResult Trainer::epoch_result(int64_t epoch, const EpochTally& t) {
  EpochResult r;
  r.epoch = epoch;
  r.step = pos_.step;
  r.train_loss = parallel::epoch_mean_loss(comm_.get(), t.loss_sum, t.batches, c_.world_invariant);
  r.images_per_s = t.train_s > 0 ? static_cast<double>(t.images) / t.train_s : 0;
  r.train_flop_per_image = step_->flop_per_image();
  r.precision = c_.precision;
  r.skipped_steps = t.skipped;
  r.comm_bytes_per_step = t.steps ? static_cast<double>(t.comm_bytes) / t.steps : 0;
  r.optimizer_state_bytes = static_cast<int64_t>(step_->optimizer().state_bytes());
  r.world_size = world_;
  if (elastic_) r.generation = r.world_size_changes = elastic_->changes();
  const parallel::StragglerScore& st = straggler_.epoch();
  if (st.stands_out) {
    r.straggler_rank = st.rank;
    r.straggler_share = st.share;
    r.straggler_late_ms = st.late_ms;
  }
  for (size_t q = 0; q < st.wait_ms.size(); ++q)
    r.wait_ms_per_step.push_back(st.wait_ms_per_step(static_cast<int>(q)));
  trace::Scope ts("evaluate", "eval");
  evaluate(*model_, mnist_.test, comm_.get(), device_, c_.world_invariant, &r);
  return r;
}

// Rank 0 writes --checkpoint: the position to go on from and every generator's state; mid-epoch
// also every rank's loss sum so far.
void Trainer::save_checkpoint(int64_t epoch, int64_t batch_in_epoch, double loss_sum) {
  if (c_.checkpoint.empty()) return;
  refuse_nonfinite(model_->state_dict(), "--checkpoint " + c_.checkpoint + " at step " +
                                             std::to_string(pos_.step) + ": not written");
  std::vector<double> sums;
  if (batch_in_epoch > 0) sums = parallel::gather_loss_sums(comm_.get(), loss_sum);
  pos_.comm_state = step_->reducer().gather_state();
  // The file an unsharded run would write (--zero 1: every rank's shards, at rank 0).
  const nn::Optimizer& opt = step_->optimizer().gathered();
  if (rank_ != 0) return;
  set_position(epoch, batch_in_epoch, std::move(sums));
  nn::save_training_checkpoint(c_.checkpoint, *model_, opt, pos_);
}

void Trainer::keep_boundary(int64_t epoch, int64_t batch_in_epoch) {
  if (!elastic_) return;
  set_position(epoch, batch_in_epoch, {loss_log_.total()});  // world-invariant: the global sum
  boundary_.keep(model_->named_buffers(), pos_);
  if (elastic_->admissions_due(*comm_, boundary_.progress()))
    throw parallel::Admission{};  // train() admits them and goes on from this boundary
}

void Trainer::set_position(int64_t epoch, int64_t batch_in_epoch, std::vector<double> sums) {
  pos_.epoch_loss_sums = std::move(sums);
  pos_.epoch = epoch;
  pos_.batch_in_epoch = batch_in_epoch;
  pos_.init_seed = static_cast<uint64_t>(c_.seed);
  pos_.dropout_seed = dropout_gen_.seed();
  pos_.dropout_offset = dropout_gen_.offset();
  pos_.model = c_.model;
  pos_.world_size = world_;
  pos_.batch_size = c_.batch_size;  // over all ranks: each takes batch_
  pos_.world_invariant = c_.world_invariant;
  // The other replicas' dropout streams, for a bit-exact resume of --mode dp.
  pos_.replica_dropout_offsets = dp_ ? dp_->replica_dropout_offsets() : std::vector<uint64_t>{};
}

void Trainer::evaluate_only() {
  EpochResult r;
  evaluate(*model_, mnist_.test, comm_.get(), device_, c_.world_invariant, &r);
  if (rank_ == 0) {
    std::printf("Evaluation only: %s weights from %s, %d rank(s)\n", c_.model.c_str(),
                resumed_from_.empty() ? c_.init_from.c_str() : resumed_from_.c_str(), world_);
    report::print_test_line(r);
  }
  if (rank_ == 0 && !c_.save.empty()) nn::save_state_dict(c_.save, *model_);
  if (comm_) comm_->barrier();
}

}  // namespace engine::apps
