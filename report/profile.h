// report/profile.h: `train --profile`: where a training step's time goes, per layer and phase,
// computed from the run's own trace events (core/trace.h).
#pragma once
#include <string>

namespace engine::report {

// A table of milliseconds per step, share of the step and GFLOP/s, from the events of rank 0's
// main thread in trace_json (the JSON of trace::to_json()). With fma_peak_gflops > 0 (the FP32
// FMA peak of the threads the rank computes on, kernels/cpu/peak.h), each layer's GFLOP/s is also
// given as a share of it, and a line states the peak.
std::string profile_table(const std::string& trace_json, double fma_peak_gflops = 0,
                          int peak_threads = 0);

}  // namespace engine::report
