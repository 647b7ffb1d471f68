// apps/train_main.cpp: `train`, one process per rank: trains a tutorial model on MNIST-format data.
#include <cstdio>

#include "apps/flags.h"
#include "apps/train/config.h"
#include "apps/train/trainer.h"
#include "core/error.h"

int main(int argc, char** argv) {
  using namespace engine::apps;
  TrainConfig c;
  Flags flags(
      "usage: train [flags]\n"
      "Trains one of the tutorials' models (simplecnn, convnet, net, linear) on an MNIST-format\n"
      "dataset. Defaults are the tutorials': batch 128, SGD lr 0.01 momentum 0.5, seed 1234.");
  declare_train_flags(flags, c);
  try {
    if (!flags.parse(argc, argv)) return 0;
  } catch (const engine::Error& e) {
    std::fprintf(stderr, "train: %s\n", e.what());
    return 2;
  }
  try {
    run_training(c);
  } catch (const engine::Error& e) {
    std::fprintf(stderr, "train: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train: internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}
