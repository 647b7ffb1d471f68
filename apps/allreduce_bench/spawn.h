// apps/allreduce_bench/spawn.h: owns --world-size: W ranks as forked processes of this host.
#pragma once
#include <functional>

namespace engine::allreduce_bench {

// Forks `world` children; child r exits with rank_main(r). Call before any thread starts. When a
// child fails (non-zero or a signal), the rest get `grace_s` seconds to fail on their own (their
// communicators notice the dead peer), then SIGKILL. Returns 0, or the first failure's exit code
// (128 + signal for a signal).
int spawn_ranks(int world, const std::function<int(int)>& rank_main, int grace_s = 10);

}  // namespace engine::allreduce_bench
