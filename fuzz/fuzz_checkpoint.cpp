// fuzz/fuzz_checkpoint.cpp: resuming from any bytes (nn/checkpoint.h, then the trainer's position
// checks, nn/checkpoint_check.h), into the linear model with SGD or Adam (the first byte
// picks): a restored position or an engine::Error naming the file, never a crash.
#include <cstdint>
#include <memory>

#include "fuzz/fuzz_util.h"
#include "io/error.h"
#include "nn/checkpoint.h"
#include "nn/checkpoint_check.h"
#include "nn/models.h"
#include "nn/optim.h"

using namespace engine;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool adam = data[0] & 1;
  fuzz::TempInput in(data + 1, size - 1, "-ck.safetensors");
  Generator init(1234), drop(1234);
  std::unique_ptr<nn::Model> model = nn::make_model("linear", {}, init, drop);
  std::unique_ptr<nn::Optimizer> opt;
  if (adam) {
    opt = std::make_unique<nn::Adam>(model->named_parameters(), kernels::AdamConfig{});
  } else {
    kernels::SgdConfig s;
    s.momentum = 0.5;
    opt = std::make_unique<nn::SGD>(model->named_parameters(), s);
  }
  nn::ResumeRun run;
  run.model = "linear";
  run.seed = 1234;  // train's default --seed
  run.epochs = 3;
  run.batches_per_epoch = 16;
  try {
    nn::TrainPosition p = nn::load_training_checkpoint(in.path(), *model, *opt);
    run.optimizer_steps = opt->steps();
    nn::check_resume_position(in.path(), p, run);
  } catch (const Error&) {
  }
  return 0;
}
