// apps/ring_demo/draw.h: pictures of a ring run: an SVG with one panel per step (the ranks on a
// ring, each chunk a small stacked bar coloured by the ranks whose inputs it holds, arrows for the
// transfers), and a self-contained HTML page that steps through the same frames.
#pragma once
#include <string>

#include "apps/ring_demo/run.h"

namespace engine::ring_demo {

// A standalone SVG document: the start and the reduce-scatter steps in the first row, the
// all-gather steps in the second, and a legend.
std::string render_svg(const DemoRun& run);

// One HTML page with inline SVG and script (no network): a frame per step with its text, Prev and
// Next buttons, the arrow keys (and Home/End).
std::string render_html(const DemoRun& run);

// The page's script: Prev and Next buttons (ids prev, next; position in id pos), the arrow keys,
// Home and End step through the elements of class "frame" (also algo_run.h's pages).
const char* frame_script();

}  // namespace engine::ring_demo
