// nn/models.h: the tutorials' models, exactly, with PyTorch's state_dict names.
//   simplecnn (seed 000), convnet (seed 002), net (seed 004), linear (784 -> 10).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/rng.h"
#include "nn/module.h"

namespace engine::nn {

struct ModelOptions {
  std::optional<float> dropout;  // overrides every dropout probability when set
};

// What every model here takes and gives: one-channel images of kModelRows x kModelCols pixels,
// scores for kModelClasses classes.
constexpr int64_t kModelRows = 28, kModelCols = 28, kModelClasses = 10;

// A model maps images (N, 1, 28, 28) to scores (N, 10) and knows its training loss.
class Model : public Module {
 public:
  // Scalar mean loss of scores (forward's output) against int64 labels (N).
  virtual Tensor loss(const Tensor& scores, const Tensor& target) = 0;
};

// name: simplecnn | convnet | net | linear. Parameters are drawn from init_gen in registration
// order; dropout masks come from dropout_gen. Throws engine::Error for an unknown name.
std::unique_ptr<Model> make_model(const std::string& name, const ModelOptions& opts,
                                  Generator& init_gen, Generator& dropout_gen);
const char* model_names();  // "simplecnn|convnet|net|linear"

}  // namespace engine::nn
