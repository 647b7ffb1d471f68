// core/rng.cpp: the process-wide generator.
#include "core/rng.h"

namespace engine {

Generator& default_generator() {
  static Generator g(0);
  return g;
}

void manual_seed(uint64_t seed) {
  default_generator().set_state(seed, 0);
}

}  // namespace engine
