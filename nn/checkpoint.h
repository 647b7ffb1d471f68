// nn/checkpoint.h: a model's parameters and buffers as safetensors under PyTorch's state_dict
// names, and training checkpoints that add optimizer state, position and RNG state so a resumed
// run continues exactly as an uninterrupted one. Every write is atomic.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "nn/module.h"
#include "nn/optim.h"

namespace engine::nn {

// Writes every parameter and buffer of m (copied to CPU) to path.
void save_state_dict(const std::string& path, const Module& m,
                     const std::map<std::string, std::string>& metadata = {});
// Loads every parameter and buffer of m from path: each key must be present with the same shape
// and dtype (errors name the file and the key); keys m does not have are errors too.
void load_state_dict(const std::string& path, Module& m);

// Where training stands, saved beside the weights.
struct TrainPosition {
  int64_t epoch = 0;           // the epoch in progress (0-based)
  int64_t batch_in_epoch = 0;  // batches of that epoch already trained
  int64_t step = 0;            // optimizer steps so far
  uint64_t init_seed = 0, dropout_seed = 0, dropout_offset = 0;  // dropout generator state
  std::map<std::string, std::string> extra;  // anything else the trainer wants kept (strings)
};

void save_training_checkpoint(const std::string& path, const Module& m, const Optimizer& opt,
                              const TrainPosition& pos);
// Restores m and opt from path and returns the saved position.
TrainPosition load_training_checkpoint(const std::string& path, Module& m, Optimizer& opt);

}  // namespace engine::nn
