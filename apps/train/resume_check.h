// apps/train/resume_check.h: where a training checkpoint stands, checked against the run that
// resumes it (nn/checkpoint_check.h has already checked the file against the model and the
// optimizer): the model and seed it was trained with, an epoch within --epochs, a batch within
// this run's epoch, the step counters agreeing, DataParallel's replicas. Errors name the file and
// the field.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "apps/train/config.h"
#include "nn/checkpoint.h"

namespace engine::apps {

// Batches in one epoch of this rank (the loader's count: the shard cut into batches of `batch`,
// the last one short).
int64_t rank_batches_per_epoch(const TrainConfig& c, int64_t n, int world, int rank, int64_t batch,
                               const std::vector<int64_t>& partition);

struct ResumeRun {
  int64_t batches_per_epoch = 0;  // rank_batches_per_epoch
  int64_t optimizer_steps = 0;    // the restored optimizer's count
  size_t dp_replicas = 0;         // --mode dp: devices - 1; 0 otherwise
};

// Throws engine::Error "<path>: field '<key>' ..." for a position this run cannot continue from.
void check_resume_position(const std::string& path, const nn::TrainPosition& p,
                           const TrainConfig& c, const ResumeRun& run);

}  // namespace engine::apps
