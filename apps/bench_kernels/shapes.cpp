// apps/bench_kernels/shapes.cpp: the models' parameters, and the sites checked against them.
#include "apps/bench_kernels/shapes.h"

#include <map>

#include "core/error.h"
#include "core/rng.h"
#include "nn/models.h"

namespace engine::bench {

using kernels::testing::batchnorm_sites;
using kernels::testing::conv_sites;
using kernels::testing::linear_sites;
using kernels::testing::ModelParams;

namespace {

std::unique_ptr<nn::Model> make(const std::string& name) {
  Generator g(1), dg(2);
  return nn::make_model(name, nn::ModelOptions{}, g, dg);
}

std::string prefixed(const std::string& layer, const std::string& what) {
  return layer.empty() ? what : layer + "." + what;
}

void expect_shape(const std::map<std::string, Shape>& shapes, const std::string& model,
                  const std::string& key, const Shape& want) {
  auto it = shapes.find(key);
  ENGINE_CHECK(it != shapes.end(), "bench_kernels: model ", model, " has no parameter ", key);
  ENGINE_CHECK(it->second == want, "bench_kernels: ", model, ".", key, " is ",
               shape_str(it->second), " but the bench's table says ", shape_str(want));
}

}  // namespace

std::vector<ModelParams> model_params() {
  std::vector<ModelParams> out;
  for (const char* name : {"simplecnn", "convnet", "net", "linear"}) {
    ModelParams mp{name, {}};
    for (const Tensor& t : make(name)->parameters()) mp.counts.push_back(t.numel());
    out.push_back(mp);
  }
  return out;
}

void verify_sites_against_models() {
  std::map<std::string, std::map<std::string, Shape>> shapes;
  for (const char* name : {"simplecnn", "convnet", "net", "linear"})
    for (auto& [key, t] : make(name)->named_parameters()) shapes[name][key] = t.shape();
  for (auto& l : linear_sites())
    expect_shape(shapes[l.model], l.model, prefixed(l.layer, "weight"), {l.out, l.in});
  for (auto& c : conv_sites())
    expect_shape(shapes[c.model], c.model, prefixed(c.layer, "weight"),
                 {c.c_out, c.c_in, c.k, c.k});
  for (auto& b : batchnorm_sites())
    expect_shape(shapes[b.model], b.model, prefixed(b.layer, "weight"), {b.c});
}

}  // namespace engine::bench
