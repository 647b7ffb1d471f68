// tests/common/mpirun.h: how the tests start ranks with Open MPI's mpirun: as root and with more
// ranks than cores (our machines), under a time limit. Sanitizer builds add what Open MPI's own
// code needs there: no leak report for its allocations at exit (AddressSanitizer), and shared
// memory only, since its TCP transport takes locks in an order ThreadSanitizer reports.
#pragma once
#include <string>

#include "tests/common/run.h"

namespace engine::testing {

inline bool have_mpirun() {
  return run("command -v mpirun").code == 0;
}

// "mpirun ... -np <np>", followed by the program and its arguments.
inline std::string mpirun_command(int np, int limit_s = 300) {
  std::string env, mca;
#if defined(__SANITIZE_ADDRESS__)
  env = "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 ";
#endif
#if defined(__SANITIZE_THREAD__)
  mca = " --mca btl self,vader";
#endif
  return env + "timeout " + std::to_string(limit_s) +
         " mpirun --allow-run-as-root --oversubscribe" + mca + " -np " + std::to_string(np);
}

}  // namespace engine::testing
