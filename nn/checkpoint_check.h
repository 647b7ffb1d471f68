// nn/checkpoint_check.h: a training checkpoint checked field by field against the run that
// resumes it, before anything is restored: what the run cannot honour is an engine::Error
// "<file>: <field>: <what is wrong>", never a silent drop, a wrapped-around number or an empty
// epoch. nn/checkpoint.cpp calls check_training_checkpoint from load_training_checkpoint; the
// trainer calls check_resume_position on the position it restored.
#pragma once
#include <cstdint>
#include <limits>
#include <string>

#include "io/safetensors.h"
#include "nn/checkpoint.h"
#include "nn/module.h"
#include "nn/optim.h"

namespace engine::nn {

// "sgd" or "adam": the optimizer's kind, as --optimizer spells it.
const char* optimizer_kind(const Optimizer& opt);

// The metadata value `key` of f as an unsigned decimal integer (digits only, no sign, no space),
// at most `max`. Throws "<path>: metadata 'key' ..." when absent, malformed or out of range.
uint64_t checkpoint_meta_uint(const StFile& f, const std::string& key, const std::string& path,
                              uint64_t max = std::numeric_limits<uint64_t>::max());

// Checks f (the file at path) against m and opt:
//   - every position and counter (engine.epoch, engine.batch_in_epoch, engine.step,
//     engine.optimizer_steps) a non-negative int64, every seed and offset (engine.init_seed,
//     engine.dropout_seed, engine.dropout_offset, dp_dropout_offset_<i>) an unsigned integer, the
//     DataParallel offsets numbered 1, 2, ... without gaps;
//   - the model's tensors all present (a file of another model names its `model` field);
//   - the optimizer: its kind (as the state's names say) is opt's, every state tensor is one opt
//   keeps (momentum_buffer for SGD with momentum, exp_avg and
//     exp_avg_sq for Adam) with its parameter's exact shape, and all of them are there once the
//     optimizer has stepped.
void check_training_checkpoint(const StFile& f, const std::string& path, const Module& m,
                               const Optimizer& opt);

// The run that resumes a checkpoint, as far as its position must agree with it.
struct ResumeRun {
  std::string model;              // --model
  int64_t seed = 0;               // --seed
  int64_t epochs = 0;             // --epochs
  int64_t batches_per_epoch = 0;  // batches in one epoch of this rank
  int64_t optimizer_steps = 0;    // the restored optimizer's count
  size_t dp_replicas = 0;         // --mode dp: devices - 1; 0 otherwise
};

// Where a training checkpoint stands, checked against the run that resumes it (after
// check_training_checkpoint has checked the file against the model and the optimizer): the model
// and seed it was trained with, an epoch within --epochs, a batch within this run's epoch, the
// step counters agreeing, DataParallel's replicas. Throws engine::Error "<path>: field '<key>' ..."
// for a position this run cannot continue from.
void check_resume_position(const std::string& path, const TrainPosition& p, const ResumeRun& run);

}  // namespace engine::nn
