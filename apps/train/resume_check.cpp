// apps/train/resume_check.cpp: see resume_check.h.
#include "apps/train/resume_check.h"

#include "core/error.h"
#include "data/sampler.h"

namespace engine::apps {

int64_t rank_batches_per_epoch(const TrainConfig& c, int64_t n, int world, int rank, int64_t batch,
                               const std::vector<int64_t>& partition) {
  const int64_t shard = c.sharding == "partition"
                            ? static_cast<int64_t>(partition.size())
                            : data::DistributedSampler(n, world, rank, c.shuffle == "on",
                                                       static_cast<uint64_t>(c.seed), c.drop_last)
                                  .num_samples();
  return (shard + batch - 1) / batch;
}

void check_resume_position(const std::string& path, const nn::TrainPosition& p,
                           const TrainConfig& c, const ResumeRun& run) {
  ENGINE_CHECK(p.model.empty() || p.model == c.model, path, ": field 'model' is '", p.model,
               "', this run trains --model ", c.model);
  ENGINE_CHECK(p.init_seed == static_cast<uint64_t>(c.seed), path, ": field 'engine.init_seed' is ",
               p.init_seed, ", this run's --seed is ", c.seed,
               " (a resumed run continues its checkpoint's seed)");
  ENGINE_CHECK(p.epoch < c.epochs || (p.epoch == c.epochs && p.batch_in_epoch == 0), path,
               ": field 'engine.epoch' is ", p.epoch, ", past the ", c.epochs,
               " epoch(s) of --epochs ", c.epochs);
  ENGINE_CHECK(p.batch_in_epoch == 0 || p.batch_in_epoch < run.batches_per_epoch, path,
               ": field 'engine.batch_in_epoch' is ", p.batch_in_epoch,
               ", past the end of an epoch of this run (", run.batches_per_epoch,
               " batches per rank)");
  ENGINE_CHECK(p.step == run.optimizer_steps, path, ": field 'engine.step' is ", p.step,
               " but 'engine.optimizer_steps' is ", run.optimizer_steps,
               " (every step is one optimizer step)");
  ENGINE_CHECK(
      p.replica_dropout_offsets.empty() || p.replica_dropout_offsets.size() == run.dp_replicas,
      path, ": fields 'dp_dropout_offset_<i>' hold ", p.replica_dropout_offsets.size(),
      " DataParallel replica(s), this run has ", run.dp_replicas,
      run.dp_replicas ? "" : " (--mode ddp)");
}

}  // namespace engine::apps
