// fuzz/fuzz_hostlist.cpp: Slurm's compressed node lists (comm/rendezvous/slurm_env.h) on any text:
// a list of hosts or an engine::Error naming the variable.
#include <cstdint>
#include <string>

#include "comm/rendezvous/slurm_env.h"
#include "io/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string list(reinterpret_cast<const char*>(data), size);
  try {
    for (const std::string& host : engine::comm::slurm::expand_hostlist(list, "SLURM_NODELIST"))
      if (host.empty()) __builtin_trap();
  } catch (const engine::Error&) {
  }
  return 0;
}
