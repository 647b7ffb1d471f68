// apps/flight_report/timeline.h: `flight_report --svg FILE`: every rank's last collectives on one
// timeline, one row per rank, a box per collective from its start to its end (in-flight and failed
// ones drawn to the rank's dump and marked), the ranks lined up on the wall clock by zero_unix_s.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "comm/health/flight_report.h"

namespace engine::flight_report {

struct TimelineOptions {
  int64_t per_rank = 20;        // each rank's last entries drawn
  std::vector<int> missing;     // ranks without a dump: a row that says so
  std::string title, subtitle;  // subtitle: one line under the title, cut to fit
  double width = 1200;          // pixels
};

// The picture as an SVG document (well-formed XML).
std::string timeline_svg(const std::vector<comm::FlightDump>& dumps, const TimelineOptions& o);

}  // namespace engine::flight_report
