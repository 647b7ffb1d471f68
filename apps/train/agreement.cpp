// apps/train/agreement.cpp: see agreement.h.
#include "apps/train/agreement.h"

#include <algorithm>

namespace engine::apps {

const std::vector<std::string>& rank_local_flags() {
  // --cuda-graph and --data-on-device change how a rank's step runs, never its numbers (a
  // replayed step and a gathered batch equal the eager ones bit for bit).
  static const std::vector<std::string> kLocal = {
      "threads", "metrics",     "plot",       "profile",  "save",       "rank",
      "timeout", "init-method", "world-size", "data-dir", "cuda-graph", "data-on-device"};
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
  return out;
}

}  // namespace engine::apps
