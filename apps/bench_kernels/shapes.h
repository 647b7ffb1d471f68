// apps/bench_kernels/shapes.h: owns what bench_kernels knows of the models (nn/models.cpp) that
// the kernels layer cannot: their parameter sizes (the update cases) and the check that the
// layer sites it times (kernels/testing/sites.h) still match them.
#pragma once
#include <vector>

#include "kernels/testing/sites.h"

namespace engine::bench {

// Parameter tensors of each model, from nn::make_model(...)->parameters().
std::vector<kernels::testing::ModelParams> model_params();

// Throws engine::Error when a linear, conv or batch-norm site disagrees with the parameter
// shapes of nn::make_model (the models changed and the sites did not).
void verify_sites_against_models();

}  // namespace engine::bench
