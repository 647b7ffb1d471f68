// apps/trace_svg_main.cpp: `trace_svg`, draw a window of a `train --trace` file as an SVG
// timeline (a lane per rank and thread) and print how much allreduce time overlaps backward.
// This file parses flags, prints and picks the exit code; apps/trace_svg/ does the work.
#include <cstdio>
#include <string>

#include "apps/program.h"
#include "apps/trace_svg/overlap.h"
#include "apps/trace_svg/render.h"
#include "apps/trace_svg/timeline.h"
#include "io/atomic_file.h"

namespace {

const char kUsage[] =
    "usage: trace_svg --in TRACE.json --out FILE.svg [--steps A:B | --steps all] [--title T]\n"
    "                 [--width PX]\n"
    "\n"
    "Draws a Chrome trace written by `train --trace` as a timeline that any browser or image\n"
    "viewer shows: one lane per (rank, thread), nested events stacked inside it, coloured by\n"
    "category, a time axis in ms. The window runs from the start of step A to the end of step B\n"
    "of rank 0 (0-based). Prints, per rank, how much of the allreduce time ran while backward\n"
    "ran: with --sync bucketed the comm thread reduces buckets during backward; with --sync\n"
    "allreduce all of it comes after.\n"
    "\n"
    "Exit status: 0 when the picture was written, 1 for a bad trace, 2 for bad flags.\n"
    "\n"
    "example: launch --nproc-per-node 2 -- train --model simplecnn --steps 8 --trace t.json\n"
    "         trace_svg --in t.json --out t.svg --steps 4:5";

// "A:B", "A" (one step) or "all" (first = -1).
void parse_steps(const std::string& text, int64_t* first, int64_t* last) {
  if (text == "all") {
    *first = *last = -1;
    return;
  }
  const size_t colon = text.find(':');
  *first = engine::apps::Flags::parse_int("steps", text.substr(0, colon));
  *last = colon == std::string::npos
              ? *first
              : engine::apps::Flags::parse_int("steps", text.substr(colon + 1));
  ENGINE_USAGE_CHECK(*first >= 0 && *first <= *last, "--steps: '", text,
                     "' wants A:B with 0 <= A <= B, or all");
}

int run(int argc, char** argv) {
  using namespace engine;
  apps::Flags flags(kUsage);
  std::string in, out, steps = "2:3", title;
  double width = 1200;
  flags.add("in", &in, "the trace file (JSON) written by train --trace");
  flags.add("out", &out, "the SVG file to write");
  flags.add("steps", &steps, "A:B draws rank 0's steps A to B (0-based); all draws everything");
  flags.add("title", &title, "the picture's title [default: the trace's file name]");
  flags.add("width", &width, "picture width in pixels (400 or more)");
  flags.require("in");
  flags.require("out");
  if (!flags.parse(argc, argv)) return 0;
  ENGINE_USAGE_CHECK(flags.rest().empty(), "unexpected argument '", flags.rest()[0], "'");
  ENGINE_USAGE_CHECK(width <= 1e6, "--width must be at most 1000000, got ", width);
  int64_t first = 0, last = 0;
  parse_steps(steps, &first, &last);

  const trace_svg::Timeline t = trace_svg::read_timeline(in);
  const trace_svg::Window w =
      first < 0 ? trace_svg::whole_window(t) : trace_svg::step_window(t, first, last, in);
  trace_svg::RenderOptions opt;
  opt.title = title.empty() ? "Training timeline: " + in : title;
  opt.width = width;
  for (const trace_svg::RankOverlap& o : trace_svg::allreduce_overlap(t, w))
    if (o.allreduces > 0) opt.notes.push_back(trace_svg::describe(o));
  if (opt.notes.size() > 1)
    opt.notes.push_back(
        "An allreduce ends when every rank has sent its part: on the rank that "
        "gets there first it includes waiting for the others.");
  std::string svg;
  try {
    svg = trace_svg::render_timeline_svg(t, w, opt);
  } catch (const Error& e) {
    ENGINE_FAIL(in, ": ", e.what());
  }
  write_file_atomic(out, svg);
  for (const std::string& line : opt.notes) std::printf("%s\n", line.c_str());
  std::printf("wrote %s (%s)\n", out.c_str(), w.label.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return engine::apps::run_program("trace_svg", argc, argv, run);
}
