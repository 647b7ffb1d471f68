// core/sync_guard.h: a debug guard against host syncs inside a training step. With the
// environment variable ENGINE_SYNC_GUARD=1, every point where the host reads a tensor's values or
// waits for a device (Tensor::item, to_vector, device -> host copies, stream and event
// synchronizes) calls note(); inside a StepScope on the same thread note() throws. The guard is
// device-independent on purpose: a CPU tensor's item() inside a step counts too, so CPU tests
// prove that the step's code path reads nothing back (on a GPU each such read is a sync).
#pragma once

namespace engine::sync_guard {

// Whether ENGINE_SYNC_GUARD=1 (core/knobs.h, read once), or what set_enabled last said.
bool enabled();
// For tests: turns the guard on or off for this process.
void set_enabled(bool on);

// Throws engine::Error("host sync inside a training step: <what> (ENGINE_SYNC_GUARD=1)") when the
// guard is on and this thread is inside a StepScope and no Allow scope; otherwise nothing.
void note(const char* what);

// Marks "inside a training step" on this thread (nests).
class StepScope {
 public:
  StepScope();
  ~StepScope();
  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;
};

// A documented per-step host read (the non-finite guard's skip decision, host-staged
// collectives): note()
// passes inside it on this thread (nests).
class Allow {
 public:
  Allow();
  ~Allow();
  Allow(const Allow&) = delete;
  Allow& operator=(const Allow&) = delete;
};

}  // namespace engine::sync_guard
