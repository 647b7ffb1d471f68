// core/sync_guard.cpp: see sync_guard.h.
#include "core/sync_guard.h"

#include <atomic>

#include "core/error.h"
#include "core/knobs.h"

namespace engine::sync_guard {
namespace {

std::atomic<int> g_enabled{-1};  // -1: not read from the environment yet
thread_local int t_step_depth = 0;
thread_local int t_allow_depth = 0;

}  // namespace

bool enabled() {
  int on = g_enabled.load(std::memory_order_relaxed);
  if (on < 0) {
    on = knobs::sync_guard() ? 1 : 0;
    g_enabled.store(on, std::memory_order_relaxed);
  }
  return on == 1;
}

void set_enabled(bool on) {
  g_enabled.store(on ? 1 : 0, std::memory_order_relaxed);
}

void note(const char* what) {
  if (t_step_depth == 0 || t_allow_depth > 0 || !enabled()) return;
  ENGINE_FAIL("host sync inside a training step: ", what, " (ENGINE_SYNC_GUARD=1)");
}

StepScope::StepScope() {
  ++t_step_depth;
}
StepScope::~StepScope() {
  --t_step_depth;
}

Allow::Allow() {
  ++t_allow_depth;
}
Allow::~Allow() {
  --t_allow_depth;
}

}  // namespace engine::sync_guard
