// apps/trace_svg/render.h: a window of a Timeline drawn as one standalone SVG: a lane per
// (rank, thread), nested events stacked by depth, colours by category with a legend, a time axis
// in ms, and a tooltip (<title>) on every box.
#pragma once
#include <string>
#include <vector>

#include "apps/trace_svg/timeline.h"

namespace engine::trace_svg {

struct RenderOptions {
  std::string title;
  std::vector<std::string> notes;  // lines printed under the title (e.g. overlap numbers)
  double width = 1200;             // pixels
};

// Throws engine::Error when no event intersects w.
std::string render_timeline_svg(const Timeline& t, const Window& w, const RenderOptions& o);

}  // namespace engine::trace_svg
