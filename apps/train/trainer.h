// apps/train/trainer.h: one rank's training run, from a TrainConfig to trained weights.
#pragma once
#include "apps/train/config.h"

namespace engine::apps {

// Trains as configured; prints progress (rank 0), writes metrics, checkpoints and weights.
// Throws engine::Error on bad input or a failed peer.
void run_training(const TrainConfig& c);

}  // namespace engine::apps
