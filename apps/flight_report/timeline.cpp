// apps/flight_report/timeline.cpp: see timeline.h.
#include "apps/flight_report/timeline.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <utility>

#include "io/svg_text.h"

namespace engine::flight_report {
namespace {

using comm::FlightDump;
using comm::FlightDumpEntry;
using comm::FlightDumpState;

constexpr double kLeft = 150, kRight = 20, kTop = 84, kRow = 30, kBox = 20, kAxis = 44;

// One box: where it starts and ends on the wall clock and how it ended.
struct Box {
  double t0 = 0, t1 = 0;
  const FlightDumpEntry* e = nullptr;
};

// The wall-clock end of e: its completion, else (in flight or failed) the rank's next start
// after it or its dump.
double end_of(const FlightDump& d, const FlightDumpEntry& e) {
  if (e.completed_s) return d.zero_unix_s + *e.completed_s;
  double end = d.written_unix_s;
  if (e.state == FlightDumpState::Failed)
    for (const FlightDumpEntry& x : d.entries)
      if (x.started_s > e.started_s) end = std::min(end, d.zero_unix_s + x.started_s);
  return std::max(end, d.zero_unix_s + e.started_s);
}

std::vector<Box> boxes_of(const FlightDump& d, int64_t per_rank) {
  std::vector<Box> out;
  const size_t n = d.entries.size(), k = static_cast<size_t>(std::max<int64_t>(per_rank, 0));
  for (size_t i = n > k ? n - k : 0; i < n; ++i)
    out.push_back({d.zero_unix_s + d.entries[i].started_s, end_of(d, d.entries[i]), &d.entries[i]});
  return out;
}

// Round ticks (1, 2 or 5 x 10^k apart) over [0, span] seconds, about 8 of them.
std::vector<double> ticks(double span) {
  const double raw = span / 8, mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  for (int i = 0; i * step <= span * (1 + 1e-9) && i < 100; ++i) t.push_back(i * step);
  return t;
}

const char* fill_of(const FlightDumpEntry& e) {
  if (e.state == FlightDumpState::Failed) return "#e15759";
  if (e.state == FlightDumpState::Started) return "#f28e2b";
  return e.call.op == comm::CollOp::AllReduce ? "#4e79a7" : "#76b7b2";
}

std::string tooltip(int rank, const FlightDumpEntry& e, double t0, const Box& b) {
  std::string s = "rank " + std::to_string(rank) + " " + e.call.str() + ": entered at " +
                  fmt("%.6f", b.t0 - t0) + " s, ";
  if (e.state == FlightDumpState::Completed) return s + fmt("inside %.3f ms", (b.t1 - b.t0) * 1e3);
  if (e.state == FlightDumpState::Started) return s + "in flight at its dump";
  return s + "failed: " + e.error;
}

struct Frame {
  double t0 = 0, t1 = 1, x0 = kLeft, x1 = 0;
  double x(double t) const { return x0 + (t - t0) / (t1 - t0) * (x1 - x0); }
};

std::string row_svg(const FlightDump& d, const std::vector<Box>& boxes, double y, const Frame& f) {
  std::string s = fmt("<text x=\"%.1f\" y=\"%.1f\" class=\"rank\">rank %d</text>\n", 8.0,
                      y + kBox / 2 + 4, d.rank);
  for (const Box& b : boxes) {
    const double x0 = f.x(b.t0), w = std::max(1.0, f.x(b.t1) - x0);
    const bool open = b.e->state != FlightDumpState::Completed;
    s += fmt("<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\"%s>", x0, y, w,
             kBox, fill_of(*b.e), open ? " stroke=\"#222\" stroke-dasharray=\"4 2\"" : "");
    s += "<title>" + xml_escape(tooltip(d.rank, *b.e, f.t0, b)) + "</title></rect>\n";
    std::string label = std::to_string(b.e->call.seq);
    label.insert(0, 1, '#');  // not "#" + s: GCC 12's -Wrestrict misfires on it
    if (w > 7.0 * static_cast<double>(label.size()) + 4)
      s += fmt("<text x=\"%.2f\" y=\"%.1f\" class=\"seq\">%s</text>\n", x0 + 3, y + kBox / 2 + 4,
               label.c_str());
  }
  const double xd = f.x(d.written_unix_s);  // the dump: where this rank's record ends
  s +=
      fmt("<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" class=\"dump\"><title>rank %d's "
          "dump: %s</title></line>\n",
          xd, y - 3, xd, y + kBox + 3, d.rank, xml_escape(d.reason).c_str());
  return s;
}

std::string axis_svg(const Frame& f, double y) {
  std::string s = fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"axis\"/>\n",
                      f.x0, y, f.x1, y);
  for (double t : ticks(f.t1 - f.t0)) {
    const double x = f.x(f.t0 + t);
    s += fmt("<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" class=\"axis\"/>", x, y, x,
             y + 5);
    s += fmt("<text x=\"%.2f\" y=\"%.1f\" class=\"tick\">%g</text>\n", x, y + 18, t);
  }
  s +=
      fmt("<text x=\"%.1f\" y=\"%.1f\" class=\"tick\">seconds from the first box (wall clock: "
          "each rank's zero_unix_s + started_s)</text>\n",
          f.x0, y + 36);
  return s;
}

std::string legend_svg(double y) {
  std::string s;
  double x = kLeft;
  const std::pair<const char*, const char*> keys[] = {{"#4e79a7", "all_reduce"},
                                                      {"#76b7b2", "other collectives"},
                                                      {"#f28e2b", "in flight at the dump"},
                                                      {"#e15759", "failed"}};
  for (const auto& [colour, what] : keys) {
    s += fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>", x, y - 10,
             colour);
    s += fmt("<text x=\"%.1f\" y=\"%.1f\" class=\"tick\">%s</text>\n", x + 16, y, what);
    x += 34 + 7.0 * static_cast<double>(std::char_traits<char>::length(what));
  }
  return s;
}

// s cut to about `width` pixels of 12 px text (6.5 px a character, generous), "..." marking the
// cut.
std::string fit(const std::string& s, double width) {
  const auto n = static_cast<size_t>(std::max(width / 6.5, 4.0));
  if (s.size() <= n) return s;
  size_t cut = n - 3;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // not mid-UTF-8
  return s.substr(0, cut) + "...";
}

}  // namespace

std::string timeline_svg(const std::vector<FlightDump>& dumps, const TimelineOptions& o) {
  std::map<int, const FlightDump*> rows;  // by rank; nullptr: no dump
  for (const FlightDump& d : dumps) rows[d.rank] = &d;
  for (int r : o.missing) rows.emplace(r, nullptr);
  std::map<int, std::vector<Box>> boxes;
  Frame f;
  f.t0 = std::numeric_limits<double>::max();
  f.t1 = std::numeric_limits<double>::lowest();
  for (const FlightDump& d : dumps) {
    boxes[d.rank] = boxes_of(d, o.per_rank);
    for (const Box& b : boxes[d.rank]) f.t0 = std::min(f.t0, b.t0);
    f.t1 = std::max(f.t1, d.written_unix_s);
  }
  if (f.t0 > f.t1) f.t0 = f.t1;  // no entries at all
  if (!(f.t1 - f.t0 > 1e-6)) f.t1 = f.t0 + 1e-3;
  f.x1 = std::max(o.width, kLeft + kRight + 100) - kRight;
  const double height = kTop + kRow * static_cast<double>(rows.size()) + kAxis + 10;
  std::string s = fmt(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
      "width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\">\n<style>text{font-size:12px;"
      "fill:#222}.title{font-size:15px}.seq{font-size:10px;fill:#fff}.rank{font-weight:bold}"
      ".axis,.dump{stroke:#222}.dump{stroke-width:2}.none{fill:#888;font-style:italic}</style>\n",
      f.x1 + kRight, height);
  s += "<text x=\"8\" y=\"20\" class=\"title\">" + xml_escape(o.title) + "</text>\n";
  s += "<text x=\"8\" y=\"40\">" + xml_escape(fit(o.subtitle, f.x1 + kRight - 16)) + "</text>\n";
  s += legend_svg(64);
  double y = kTop;
  for (const auto& [rank, d] : rows) {
    if (d)
      s += row_svg(*d, boxes[rank], y, f);
    else
      s +=
          fmt("<text x=\"8\" y=\"%.1f\" class=\"rank\">rank %d</text><text x=\"%.1f\" y=\"%.1f\" "
              "class=\"none\">no dump</text>\n",
              y + kBox / 2 + 4, rank, kLeft, y + kBox / 2 + 4);
    y += kRow;
  }
  return s + axis_svg(f, y) + "</svg>\n";
}

}  // namespace engine::flight_report
