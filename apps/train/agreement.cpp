// apps/train/agreement.cpp: see agreement.h.
#include "apps/train/agreement.h"

#include <algorithm>

namespace engine::apps {

const std::vector<std::string>& rank_local_flags() {
  static const std::vector<std::string> kLocal = {"threads",    "metrics", "plot",    "profile",
                                                  "save",       "rank",    "timeout", "init-method",
                                                  "world-size", "data-dir"};
  return kLocal;
}

std::vector<Setting> config_settings(const TrainConfig& c) {
  TrainConfig copy = c;
  Flags f("");
  declare_train_flags(f, copy);
  const std::vector<std::string>& local = rank_local_flags();
  std::vector<Setting> out;
  for (const Flags::Value& v : f.values())
    if (std::find(local.begin(), local.end(), v.name) == local.end())
      out.push_back({"--" + v.name, v.value});
  // The ENGINE_* variables that change the numbers or the collectives' schedule (ENGINE_CUDA_GRAPH
  // and ENGINE_DATA_ON_DEVICE change neither: a replayed step and a gathered batch equal the eager
  // ones bit for bit).
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"ENGINE_ALGO", c.algo},
           {"ENGINE_CUDA_KERNELS", c.cuda_kernels},
           {"ENGINE_CUDA_RING", c.cuda_ring},
           {"ENGINE_RING_PROTOCOL", c.cuda_ring_protocol},
           {"ENGINE_RING_CHANNELS", std::to_string(c.cuda_ring_channels)}})
    out.push_back({name, value});
  return out;
}

}  // namespace engine::apps
