// apps/ring_demo/report.h: the demo's text for people: what the ring does, every step of every
// rank, and the check of the result against the direct computation.
#pragma once
#include <string>
#include <vector>

#include "apps/ring_demo/run.h"

namespace engine::ring_demo {

// A number as the shortest text that reads back as the same float ("600", "37.5", "0.1").
std::string format_value(float v);
// A buffer with its chunk boundaries marked: "| 0 1 | 2 3 | 4 |".
std::string format_buffer(const std::vector<float>& values, const std::vector<comm::Range>& chunks);

// The set-up: chunks, the ring, the inputs' rule.
std::string describe_intro(const DemoRun& run);
// What a phase does (printed before its first step); "" for frames that start no phase.
std::string describe_phase(const DemoRun& run, size_t frame);
// One frame: every rank's send, receive and buffer afterwards (the start: every rank's input).
std::string describe_frame(const DemoRun& run, size_t frame);
// Final buffers checked against the direct computation, and the bytes each rank sent.
// ok: every check passed.
std::string describe_result(const DemoRun& run, bool* ok);

// Everything above in order: what `ring_demo` prints.
std::string full_report(const DemoRun& run, bool* ok);

}  // namespace engine::ring_demo
