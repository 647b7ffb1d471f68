// apps/train_main.cpp: `train`, one process per rank: trains a tutorial model on MNIST-format data.
#include "apps/program.h"
#include "apps/train/config.h"
#include "apps/train/trainer.h"

int main(int argc, char** argv) {
  using namespace engine::apps;
  return run_program("train", argc, argv, [](int argc, char** argv) {
    TrainConfig c;
    Flags flags(
        "usage: train [flags]\n"
        "Trains one of the tutorials' models (simplecnn, convnet, net, linear) on an MNIST-format\n"
        "dataset. Defaults are the tutorials': batch 128, SGD lr 0.01 momentum 0.5, seed 1234.");
    declare_train_flags(flags, c);
    if (!flags.parse(argc, argv)) return 0;
    ENGINE_USAGE_CHECK(flags.rest().empty(), "unexpected argument '", flags.rest()[0], "'");
    as_usage_error([&] { validate(c); });
    run_training(c);
    return 0;
  });
}
