// comm/base/store.cpp: see store.h.
#include "comm/base/store.h"

namespace engine::comm {

std::string Store::timeout_message(const std::vector<std::string>& missing, Millis timeout) const {
  std::string keys;
  for (size_t i = 0; i < missing.size(); ++i) keys += (i ? ", '" : "'") + missing[i] + "'";
  return "store " + describe() + ": key(s) " + keys + " not set within " + seconds_str(timeout);
}

}  // namespace engine::comm
