// nn/checkpoint_check.h: a training checkpoint checked field by field against the run that
// resumes it, before anything is restored: what the run cannot honour is an engine::Error
// "<file>: <field>: <what is wrong>", never a silent drop, a wrapped-around number or an empty
// epoch. nn/checkpoint.cpp calls check_training_checkpoint from load_training_checkpoint; the
// trainer calls check_resume_position on the position it restored.
#pragma once
#include <cstdint>
#include <limits>
#include <string>

#include "core/error.h"
#include "io/safetensors.h"
#include "nn/checkpoint.h"
#include "nn/module.h"
#include "nn/optim.h"

namespace engine::nn {

// "sgd" or "adam": the optimizer's kind, as a run's optimizer choice spells it.
const char* optimizer_kind(const Optimizer& opt);

// The metadata value `key` of f as an unsigned decimal integer (digits only, no sign, no space),
// at most `max`. Throws "<path>: metadata 'key' ..." when absent, malformed or out of range.
uint64_t checkpoint_meta_uint(const StFile& f, const std::string& key, const std::string& path,
                              uint64_t max = std::numeric_limits<uint64_t>::max());

// Checks f (the file at path) against m and opt:
//   - every position and counter (engine.epoch, engine.batch_in_epoch, engine.step,
//     engine.optimizer_steps) a non-negative int64, every seed and offset (engine.init_seed,
//     engine.dropout_seed, engine.dropout_offset, dp_dropout_offset_<i>) an unsigned integer, the
//     DataParallel offsets numbered 1, 2, ... without gaps; where present, the writer's
//     engine.world_size and engine.batch_size positive int64s, engine.world_invariant 0 or 1;
//   - the model's tensors all present (a file of another model names its `model` field);
//   - the optimizer: its kind (as the state's names say) is opt's, every state tensor is one opt
//   keeps (momentum_buffer for SGD with momentum, exp_avg and
//     exp_avg_sq for Adam) with its parameter's exact shape, and all of them are there once the
//     optimizer has stepped.
void check_training_checkpoint(const StFile& f, const std::string& path, const Module& m,
                               const Optimizer& opt);

// A checkpoint that contradicts a setting of the run that loads it. what() names the setting in
// words ("this run's seed is 7"); worded(name) puts the caller's name for it in their place
// (an app's flag), so that the message names what its user sets.
class ResumeMismatch : public Error {
 public:
  enum class Setting { Optimizer, Model, Seed, Epochs, OneProcessPerRank, WorldSize, BatchSize };
  ResumeMismatch(Setting s, std::string before, const std::string& words, std::string after)
      : Error(before + words + after),
        setting(s),
        before_(std::move(before)),
        after_(std::move(after)) {}
  std::string worded(const std::string& name) const { return before_ + name + after_; }
  Setting setting;

 private:
  std::string before_, after_;
};

// The run that resumes a checkpoint, as far as its position must agree with it.
struct ResumeRun {
  std::string model;              // the model's name
  int64_t seed = 0;               // of initialisation (the checkpoint's own)
  int64_t epochs = 0;             // the run's length in epochs
  int64_t batches_per_epoch = 0;  // batches in one epoch of this rank
  int64_t optimizer_steps = 0;    // the restored optimizer's count
  size_t dp_replicas = 0;         // one process over several devices: devices - 1; 0 otherwise
  // For a run that goes on from the position: its ranks and its images per step over all ranks;
  // 0 for one that only evaluates the weights (no position to go on from, any world size).
  int64_t world_size = 0, batch_size = 0;
  bool world_invariant = false;  // in the world-invariant mode (one global data order)
};

// Where a training checkpoint stands, checked against the run that resumes it (after
// check_training_checkpoint has checked the file against the model and the optimizer): the model
// and seed it was trained with, an epoch within the run's epochs, a batch within this run's epoch,
// the step counters agreeing, DataParallel's replicas. A file that names its world size or batch
// size continues at another only where the position means the same there: at an epoch's end, with
// no rank's own state in it (PowerSGD's error feedback once it holds anything; the batch size
// leaves that alone); mid-epoch, engine.batch_in_epoch counts steps over the writer's shards and
// batches, and the mode (its data order) must agree too; in the world-invariant mode it counts
// global batches of one order, and any world size goes on from it. Throws engine::Error "<path>:
// field
// '<key>' ..." (ResumeMismatch where a setting of the run decides) for a position this run cannot
// continue from.
void check_resume_position(const std::string& path, const TrainPosition& p, const ResumeRun& run);

}  // namespace engine::nn
