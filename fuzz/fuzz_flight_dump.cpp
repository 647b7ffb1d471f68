// fuzz/fuzz_flight_dump.cpp: the flight recorder's dump reader (comm/health/flight_report.h) on
// any bytes: a dump or an engine::Error naming the source. A dump that reads is then analysed as
// two ranks of one job (itself and a copy one rank on), so the analysis and its text run on every
// shape the reader lets through; the verdict must be one non-empty line.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "comm/health/flight_report.h"
#include "io/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace engine::comm;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<FlightDump> dumps;
  try {
    dumps.push_back(parse_flight_dump(text, "rank0.json"));
  } catch (const engine::Error&) {
    return 0;
  }
  if (dumps[0].world > 1) {
    dumps.push_back(dumps[0]);
    dumps[1].rank = (dumps[0].rank + 1) % dumps[0].world;
  }
  FlightReportOptions o;
  o.last = 1 + static_cast<int64_t>(size % 7);
  const FlightVerdict v = analyze_flight(dumps, o).verdict;
  if (v.headline.empty() || v.headline.find('\n') != std::string::npos) __builtin_trap();
  return 0;
}
