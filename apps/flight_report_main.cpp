// apps/flight_report_main.cpp: `flight_report DIR`, explain a failed or slow job from the flight
// recorder's dumps (DIR/rank<N>.json, docs/flight_recorder.md): the verdict on one line, then the
// evidence. This file parses flags, prints and picks the exit code; comm/health/flight_report.h
// does the analysis, apps/flight_report/ the picture.
#include <cstdio>
#include <string>
#include <vector>

#include "apps/flight_report/timeline.h"
#include "apps/program.h"
#include "comm/health/flight_report.h"
#include "io/atomic_file.h"

namespace {

const char kUsage[] =
    "usage: flight_report [--last N] [--svg FILE] [--svg-last K] DIR\n"
    "\n"
    "Reads the dumps that `train --flight-recorder DIR` ranks write (DIR/rank<N>.json) and says\n"
    "why the job failed or was slow, naming collectives by their sequence numbers as the errors\n"
    "do (#42 all_reduce(...)). The first cause found, in this order: ranks that call different\n"
    "collectives; a rank that never entered the collective the others stopped in, that their\n"
    "errors name, or that wrote no dump while they waited; a rank that arrived last in most of\n"
    "the last N collectives every rank completed. Prints that verdict on the first line, then\n"
    "the evidence.\n"
    "\n"
    "Exit status: 0 when a cause was found, 1 when the dumps show none, 2 for bad input (a\n"
    "missing folder, a bad dump: one line naming the file) or bad flags.\n"
    "\n"
    "example: train --flight-recorder out/flight ...; flight_report --svg out/flight.svg "
    "out/flight";

// Bad input is told apart from a run that found nothing: exit 2, one line naming the file.
int bad_input(std::string message) {
  for (char& c : message)
    if (c == '\n' || c == '\r') c = ' ';
  std::fflush(stdout);
  std::fprintf(stderr, "flight_report: %s\n", message.c_str());
  return 2;
}

int run(int argc, char** argv) {
  using namespace engine;
  apps::Flags flags(kUsage);
  int64_t last = 100, svg_last = 20;
  std::string svg;
  flags.add("last", &last, "the straggler window: the last N collectives every rank completed");
  flags.add("svg", &svg, "also draw every rank's last collectives on one timeline, as SVG");
  flags.add("svg-last", &svg_last, "how many collectives of each rank --svg draws");
  flags.stop_at_first_positional();
  if (!flags.parse(argc, argv)) return 0;
  ENGINE_USAGE_CHECK(!flags.rest().empty(), "DIR (the flight recorder's folder) is required");
  ENGINE_USAGE_CHECK(flags.rest().size() == 1, "unexpected argument '", flags.rest()[1],
                     "' after DIR (flags go before DIR)");
  apps::check_range("--last", last, 1, 1000000);
  apps::check_range("--svg-last", svg_last, 1, 2000);
  const std::string dir = flags.rest()[0];

  std::vector<comm::FlightDump> dumps;
  try {
    dumps = comm::read_flight_dumps(dir);
  } catch (const Error& e) {
    return bad_input(e.what());
  }
  comm::FlightReportOptions options;
  options.last = last;
  const comm::FlightAnalysis a = comm::analyze_flight(dumps, options);
  std::printf("%s\n", a.verdict.headline.c_str());
  for (const std::string& line : a.verdict.evidence) std::printf("%s\n", line.c_str());
  if (!svg.empty()) {
    flight_report::TimelineOptions t;
    t.per_rank = svg_last;
    t.missing = a.missing;
    t.title = "Flight recorder: " + dir;
    t.subtitle = a.verdict.headline;
    write_file_atomic(svg, flight_report::timeline_svg(dumps, t));
    std::printf("wrote %s\n", svg.c_str());
  }
  return a.verdict.cause == comm::FlightCause::None ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return engine::apps::run_program("flight_report", argc, argv, run);
}
