// nn/checkpoint.h: a model's parameters and buffers as safetensors under PyTorch's state_dict
// names, and training checkpoints that add optimizer state, position and RNG state so a resumed
// run continues exactly as an uninterrupted one. Every write is atomic.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "nn/module.h"
#include "nn/optim.h"

namespace engine::nn {

// Writes every parameter and buffer of m (copied to CPU) to path.
void save_state_dict(const std::string& path, const Module& m,
                     const std::map<std::string, std::string>& metadata = {});
// Loads every parameter and buffer of m from path: each key must be present with the same shape
// and dtype (errors name the file and the key); keys m does not have are errors too.
void load_state_dict(const std::string& path, Module& m);

// Where training stands, saved beside the weights. Every field is a key of the file's metadata
// (the names in brackets), so checkpoints of any version of train read back the same way.
struct TrainPosition {
  int64_t epoch = 0;           // the epoch in progress, 0-based [engine.epoch]
  int64_t batch_in_epoch = 0;  // batches of that epoch already trained [engine.batch_in_epoch]
  int64_t step = 0;            // optimizer steps so far [engine.step]
  uint64_t init_seed = 0;      // the parameters' initialisation seed [engine.init_seed]
  // This rank's dropout generator [engine.dropout_seed, engine.dropout_offset].
  uint64_t dropout_seed = 0, dropout_offset = 0;
  // One process over several devices: the dropout offsets of DataParallel's replicas 1..N-1,
  // [i - 1] for replica i (their seeds follow from the run's seed) [dp_dropout_offset_<i>];
  // empty otherwise.
  std::vector<uint64_t> replica_dropout_offsets;
  std::string model;  // the model's name [model]; "" when the file does not say
  // Mid-epoch: each rank's sum of its training losses over the epoch's first batch_in_epoch
  // batches, [r] for rank r, so that the epoch line after a resume is the whole epoch's mean
  // [engine.epoch_loss_sums: hexadecimal floats, comma-separated]; empty when the file does not
  // say (checkpoints of older versions, or at an epoch's start).
  std::vector<double> epoch_loss_sums;
  // State of the gradient communication (PowerSGD's Q and error feedback), tensors named by
  // their owner [entries "comm.<name>"], one rank's own named "<name>.rank<r>"; empty when the
  // run keeps none.
  NamedTensors comm_state;
  // The run that wrote it: its number of ranks [engine.world_size] and its images per step over
  // all ranks, of which each rank takes batch_size / world_size [engine.batch_size]; 0 when the
  // file does not say (checkpoints of older versions). batch_in_epoch counts steps of that run.
  int64_t world_size = 0, batch_size = 0;
  // Written in the world-invariant mode, whose data order is one global order for every world
  // size [engine.world_invariant: 0 or 1; absent in older versions, which had no such mode].
  bool world_invariant = false;
};
void save_training_checkpoint(const std::string& path, const Module& m, const Optimizer& opt,
                              const TrainPosition& pos);
// Restores m and opt from path and returns the saved position.
TrainPosition load_training_checkpoint(const std::string& path, Module& m, Optimizer& opt);
// The same file's bytes in memory (a rank's state streamed to another, parallel/elastic.h); errors
// name `source`.
std::string encode_training_checkpoint(const Module& m, const Optimizer& opt,
                                       const TrainPosition& pos);
TrainPosition decode_training_checkpoint(std::string_view bytes, Module& m, Optimizer& opt,
                                         const std::string& source);

}  // namespace engine::nn
