// apps/train/agreement.h: what train's ranks compare before they start (parallel/agreement.h
// compares them): every flag that changes the math or the data.
#pragma once
#include <string>
#include <vector>

#include "apps/train/config.h"
#include "parallel/agreement.h"

namespace engine::apps {

using parallel::Setting;
// Flags that change only this rank's own behaviour (where it reads or writes files, how many
// threads, how long it waits, what it reports): they may differ between ranks. --data-dir is
// here because the data itself is compared (data_settings). docs/training.md lists the same.
const std::vector<std::string>& rank_local_flags();

// Every train flag (declare_train_flags) but the rank-local ones, with its value in c, in
// declaration order (a flag declared later is compared without further work), then the ENGINE_*
// variables that change the numbers or the collectives, under their names.
std::vector<Setting> config_settings(const TrainConfig& c);

}  // namespace engine::apps
