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
        "dataset. Defaults are the tutorials': batch 128, SGD lr 0.01 momentum 0.5, seed 1234.\n"
        "Knobs that force a choice (collective algorithm, CUDA kernels, the CUDA ring, CUDA\n"
        "graphs) are ENGINE_* environment variables: docs/knobs.md.");
    declare_train_flags(flags, c);
    if (!flags.parse(argc, argv)) return 0;
    ENGINE_USAGE_CHECK(flags.rest().empty(), "unexpected argument '", flags.rest()[0], "'");
    ENGINE_USAGE_CHECK(!c.world_invariant || !flags.given("sharding"), "--world-invariant takes ",
                       "one global data order, the same at every world size; --sharding ",
                       c.sharding, " splits the data by world size: drop it");
    read_knobs(c);  // a bad value: exit 1 naming the variable, as at its first use before
    as_usage_error([&] { validate(c); });
    run_training(c);
    return 0;
  });
}
