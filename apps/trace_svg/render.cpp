// apps/trace_svg/render.cpp: see render.h. Plain SVG 1.1 (rects, lines, text, one pattern); no
// script or CSS, so browsers, image viewers and rsvg draw it the same.
#include "apps/trace_svg/render.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

#include "apps/trace_svg/svg.h"
#include "core/error.h"

namespace engine::trace_svg {
namespace {

constexpr double kLeft = 128, kRight = 20;  // the plot area's margins; lane names on the left
constexpr double kRow = 18, kPad = 3;       // one nesting level; padding inside a lane
constexpr double kLabelSize = 10, kFont = 12;
constexpr const char* kFamily = "Helvetica, Arial, sans-serif";
constexpr const char* kWaitFill = "url(#wait)";
constexpr const char* kBackwardShade = "#fbdcbc";  // backward's orange, light

struct Scale {
  double x0, x1, px0, px1;  // microseconds -> pixels
  double operator()(double us) const { return px0 + (us - x0) / (x1 - x0) * (px1 - px0); }
};

bool is_wait(const Event& e) {
  return e.name.size() >= 4 && e.name.compare(e.name.size() - 4, 4, "wait") == 0;
}

bool is_backward(const Event& e) {
  return e.name == "backward" && e.category == "backward";
}

bool has_backward(const std::vector<Event>& evs) {
  return std::any_of(evs.begin(), evs.end(), is_backward);
}

std::string arg(const Event& e, const std::string& key) {
  for (const auto& [k, v] : e.args)
    if (k == key) return v;
  return {};
}

// Bytes as people read them: "512 B", "3.5 KiB", "1.00 MiB".
std::string size_text(double bytes) {
  if (bytes >= 1024.0 * 1024) return fmt("%.2f MiB", bytes / (1024.0 * 1024));
  if (bytes >= 1024.0) return fmt("%.1f KiB", bytes / 1024.0);
  return fmt("%.0f B", bytes);
}

// The label for a box w pixels wide: the longest candidate that fits, else the first cut short.
std::string box_label(const Event& e, double w) {
  std::vector<std::string> cands{e.name};
  if (e.category == "step") cands = {e.name + " " + std::to_string(e.seq)};
  if (const std::string b = arg(e, "bucket"); !b.empty()) {
    const std::string bytes = arg(e, "bytes");
    const std::string mb =
        bytes.empty() ? "" : ", " + size_text(std::strtod(bytes.c_str(), nullptr));
    cands = {e.name + " bucket " + b + mb, e.name + " bucket " + b, e.name + " b" + b, "b" + b};
  }
  for (const std::string& c : cands)
    if (text_width(c, kLabelSize) <= w - 6) return c;
  return cands.size() > 1 ? "" : truncate_to(cands[0], w - 6, kLabelSize);
}

std::string tooltip(const Event& e, double window_start_us) {
  std::string s = e.name + " (" + e.category +
                  "): " + fmt("%.3f ms", (e.end_us - e.start_us) / 1e3) +
                  fmt(", at +%.3f ms", (e.start_us - window_start_us) / 1e3);
  for (const auto& [k, v] : e.args) s += ", " + k + "=" + v;
  return s;
}

// The boxes of one lane; same-category nesting gets lighter with each level so children stand
// out from their parent (a backward node inside "backward").
std::string lane_boxes(const std::vector<Event>& evs, double top, const Scale& sx, double w0) {
  std::string s;
  std::vector<std::string> open_cats;  // category at each depth of the current stack
  for (const Event& e : evs) {
    open_cats.resize(static_cast<size_t>(e.depth));
    const int same = static_cast<int>(std::count(open_cats.begin(), open_cats.end(), e.category));
    open_cats.push_back(e.category);
    const double x = sx(e.start_us), w = std::max(sx(e.end_us) - x, 0.6);
    const double y = top + kPad + e.depth * kRow;
    const std::string fill = lighten(category_colour(e.category), std::min(0.3 * same, 0.6));
    const bool wait = is_wait(e);
    s += fmt("<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\"", x, y, w,
             kRow - 2, wait ? kWaitFill : fill.c_str());
    s += w > 3 ? " stroke=\"#fff\" stroke-width=\"0.6\">" : ">";
    s += "<title>" + xml_escape(tooltip(e, w0)) + "</title></rect>\n";
    const std::string label = box_label(e, w);
    if (!label.empty())
      s += fmt("<text x=\"%.2f\" y=\"%.1f\" font-size=\"%g\" fill=\"%s\">%s</text>\n", x + 3,
               y + kRow - 6, kLabelSize, wait ? "#5a1517" : text_colour_on(fill),
               xml_escape(label).c_str());
  }
  return s;
}

struct LegendItem {
  std::string fill, text;
};

std::vector<LegendItem> legend_items(const std::set<std::string>& cats, bool waits, bool shaded) {
  static const std::vector<std::pair<std::string, std::string>> known{
      {"data", "data: next batch"},
      {"step", "step"},
      {"forward", "forward (per module)"},
      {"backward", "backward (per autograd node)"},
      {"comm", "comm: allreduce, broadcast"},
      {"optimizer", "optimizer"},
      {"eval", "eval"}};
  std::vector<LegendItem> out;
  for (const auto& [cat, text] : known)
    if (cats.count(cat)) out.push_back({category_colour(cat), text});
  for (const std::string& c : cats)
    if (std::none_of(known.begin(), known.end(), [&](auto& k) { return k.first == c; }))
      out.push_back({category_colour(c), c.empty() ? "(no category)" : c});
  if (waits) out.push_back({kWaitFill, "waiting for comm"});
  if (shaded) out.push_back({kBackwardShade, "shade: this rank's backward is running"});
  return out;
}

// Starts of rank 0's steps inside w, with their 0-based numbers.
std::vector<std::pair<int, double>> step_starts(const Timeline& t, const Window& w) {
  std::vector<double> starts;
  const int64_t rank = t.lanes.front().pid;
  for (const Lane& l : t.lanes)
    if (l.pid == rank)
      for (const Event& e : l.events)
        if (e.name == "step" && e.category == "step") starts.push_back(e.start_us);
  std::sort(starts.begin(), starts.end());
  std::vector<std::pair<int, double>> out;
  for (size_t i = 0; i < starts.size(); ++i)
    if (starts[i] >= w.start_us && starts[i] < w.end_us)
      out.push_back({static_cast<int>(i), starts[i]});
  return out;
}

// Each rank's backward spans: shaded behind its lanes that do not run backward (the comm
// thread's), so that an allreduce box on shade is an allreduce hidden behind backward.
std::map<int64_t, std::vector<std::pair<double, double>>> backward_spans(const Timeline& t,
                                                                         const Window& w) {
  std::map<int64_t, std::vector<std::pair<double, double>>> backward;
  for (const Lane& lane : t.lanes) {
    int rows = 0;
    for (const Event& e : events_in(lane, w, &rows))
      if (is_backward(e)) backward[lane.pid].push_back({e.start_us, e.end_us});
  }
  return backward;
}

// The lanes drawn from y = top down: their backgrounds, shades and boxes, their names, and what
// the legend must explain.
struct Lanes {
  std::string boxes, names;
  std::set<std::string> cats;
  bool waits = false, shaded = false;
  size_t n_events = 0;
  double bottom = 0;
};

Lanes draw_lanes(const Timeline& t, const Window& w, const Scale& sx, double width, double top) {
  Lanes out;
  const auto backward = backward_spans(t, w);
  double y = top;
  for (size_t i = 0; i < t.lanes.size(); ++i) {
    const Lane& lane = t.lanes[i];
    if (i > 0) y += lane.pid != t.lanes[i - 1].pid ? 14 : 4;
    int rows = 0;
    const std::vector<Event> evs = events_in(lane, w, &rows);
    const double h = std::max(rows, 1) * kRow + 2 * kPad;
    out.boxes += fmt("<rect x=\"%g\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
                     kLeft, y, width - kRight - kLeft, h, lane.pid % 2 ? "#f6f3ee" : "#f1f4f7");
    out.names +=
        fmt("<text x=\"%g\" y=\"%.1f\" font-size=\"%g\" font-weight=\"bold\" "
            "text-anchor=\"end\" fill=\"#333\">%s</text>\n",
            kLeft - 10, y + kPad + kRow - 5, kFont, xml_escape(lane.name).c_str());
    if (auto spans = backward.find(lane.pid); spans != backward.end() && !has_backward(evs))
      for (auto [b, e] : spans->second) {
        out.boxes +=
            fmt("<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" "
                "fill=\"%s\"/>\n",
                sx(b), y, sx(e) - sx(b), h, kBackwardShade);
        out.shaded = true;
      }
    out.boxes += lane_boxes(evs, y, sx, w.start_us);
    for (const Event& e : evs) {
      out.cats.insert(e.category);
      out.waits = out.waits || is_wait(e);
    }
    out.n_events += evs.size();
    y += h;
  }
  out.bottom = y;
  return out;
}

// The pattern of waits, the background, the title, the window's line and the notes.
std::string heading(const Window& w, const RenderOptions& o, size_t n_events) {
  std::string s;
  s += "<defs><pattern id=\"wait\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
       "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f9d3d3\"/>"
       "<rect width=\"2.4\" height=\"6\" fill=\"#e15759\"/></pattern></defs>\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
  s +=
      fmt("<text x=\"%g\" y=\"30\" font-size=\"18\" font-weight=\"bold\" fill=\"#222\">%s</text>\n",
          kLeft - 110, xml_escape(o.title).c_str());
  s +=
      fmt("<text x=\"%g\" y=\"52\" font-size=\"%g\" fill=\"#555\">%s: %.2f ms, %zu events</text>\n",
          kLeft - 110, kFont, xml_escape(w.label).c_str(), (w.end_us - w.start_us) / 1e3, n_events);
  for (size_t i = 0; i < o.notes.size(); ++i)
    s += fmt("<text x=\"%g\" y=\"%.1f\" font-size=\"%g\" fill=\"#333\">%s</text>\n", kLeft - 110,
             74 + 16.0 * static_cast<double>(i), kFont, xml_escape(o.notes[i]).c_str());
  return s;
}

// Grid lines (ticks, and rank 0's step boundaries: dashed over every lane, numbered above) and
// the time axis in ms from the window's start, at y = axis_y.
std::pair<std::string, std::string> grid_and_axis(const Timeline& t, const Window& w,
                                                  const Scale& sx, double width, double lanes_top,
                                                  double axis_y) {
  const double span_ms = (w.end_us - w.start_us) / 1e3;
  std::string grid, axis;
  for (double v : nice_ticks(0, span_ms, 10)) {
    const double x = sx(w.start_us + v * 1e3);
    grid += fmt("<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#dcdcdc\"/>\n", x,
                lanes_top, x, axis_y);
    axis +=
        fmt("<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#333\"/>"
            "<text x=\"%.2f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\" "
            "fill=\"#333\">%s</text>\n",
            x, axis_y, x, axis_y + 5, x, axis_y + 18, tick_label(v).c_str());
  }
  axis += fmt("<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"#333\"/>\n", kLeft,
              axis_y, width - kRight, axis_y);
  axis +=
      fmt("<text x=\"%g\" y=\"%.1f\" font-size=\"%g\" text-anchor=\"middle\" fill=\"#333\">"
          "time (ms) from the start of %s</text>\n",
          (kLeft + width - kRight) / 2, axis_y + 36, kFont, xml_escape(w.label).c_str());
  for (auto [n, us] : step_starts(t, w)) {
    const double x = sx(us);
    grid +=
        fmt("<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#666\" "
            "stroke-dasharray=\"4 3\"/>\n<text x=\"%.2f\" y=\"%.1f\" font-size=\"11\" "
            "fill=\"#444\">step %d</text>\n",
            x, lanes_top - 14, x, axis_y, x + 3, lanes_top - 4, n);
  }
  return {grid, axis};
}

// The legend from y = top, wrapping to more rows when wide; *bottom is its last row's baseline.
std::string legend(const Lanes& lanes, double width, double top, double* bottom) {
  std::string s;
  double lx = kLeft, ly = top;
  for (const LegendItem& it : legend_items(lanes.cats, lanes.waits, lanes.shaded)) {
    const double iw = 14 + 6 + text_width(it.text, kFont) + 22;
    if (lx + iw > width - kRight && lx > kLeft) {
      lx = kLeft;
      ly += 20;
    }
    s +=
        fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" fill=\"%s\"/>"
            "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%g\" fill=\"#333\">%s</text>\n",
            lx, ly - 11, it.fill.c_str(), lx + 20, ly, kFont, xml_escape(it.text).c_str());
    lx += iw;
  }
  *bottom = ly;
  return s;
}

}  // namespace

std::string render_timeline_svg(const Timeline& t, const Window& w, const RenderOptions& o) {
  const double width = std::max(o.width, 400.0);
  const Scale sx{w.start_us, std::max(w.end_us, w.start_us + 1), kLeft, width - kRight};
  // Lanes first: their heights decide the picture's. They start below title, notes and steps.
  const double lanes_top = 74 + 16.0 * static_cast<double>(o.notes.size()) + 18;
  const Lanes lanes = draw_lanes(t, w, sx, width, lanes_top);
  ENGINE_CHECK(lanes.n_events > 0, "no events in ", w.label);
  const double axis_y = lanes.bottom + 8;
  const auto [grid, axis] = grid_and_axis(t, w, sx, width, lanes_top, axis_y);
  double legend_bottom = 0;
  const std::string key = legend(lanes, width, axis_y + 58, &legend_bottom);
  const double height = legend_bottom + 18;
  return fmt("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
             "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%g\" "
             "height=\"%.0f\" viewBox=\"0 0 %g %.0f\" font-family=\"%s\">\n",
             width, height, width, height, kFamily) +
         heading(w, o, lanes.n_events) + grid + lanes.boxes + lanes.names + axis + key + "</svg>\n";
}

}  // namespace engine::trace_svg
