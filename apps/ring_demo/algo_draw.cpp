// apps/ring_demo/algo_draw.cpp: the pictures of `ring_demo --algo rd|rh|tree` (algo_run.h). Each
// round is a panel: the ranks on a circle (rank 0 on top, clockwise), an arrow from sender to
// receiver per message, labelled with its elements near the sender; orange arrows combine, green
// ones copy.
#include <cmath>
#include <numbers>

#include "apps/ring_demo/algo_run.h"
#include "apps/ring_demo/draw.h"
#include "apps/ring_demo/report.h"
#include "io/svg_text.h"

namespace engine::ring_demo {
namespace {

constexpr double kW = 300, kH = 290, kR = 95;  // panel size, circle radius
constexpr int kPerRow = 4;

std::string str(const char* f, auto... args) {
  return engine::fmt(f, args...);
}

struct Pt {
  double x, y;
};

Pt at(int r, int W) {
  const double a = (-90.0 + 360.0 * r / W) * std::numbers::pi / 180.0;
  return {kW / 2 + kR * std::cos(a), 40 + kR + kR * std::sin(a)};
}

// An arrow's label (font-size 10: about 5.6 px a character, 10 px high) beside its shaft from a
// to b: a third of the way from the source and at most 24 px along, away from the middle where
// crossing arrows meet (0-2 and 1-3 at W = 4, every diameter at W = 8), on the side the arrow is
// shifted to, its box clear of the shaft.
std::string label(Pt a, Pt b, const std::string& text, const char* colour) {
  const double dx = b.x - a.x, dy = b.y - a.y, len = std::max(1.0, std::hypot(dx, dy));
  const double nx = -dy / len, ny = dx / len;  // the shaft's left, seen from its source
  const double half_w = 2.8 * static_cast<double>(text.size()), half_h = 5;
  const double d = 3 + half_w * std::abs(nx) + half_h * std::abs(ny);
  const double t = std::min(1.0 / 3, 24 / len);
  const double cx = a.x + t * dx + d * nx, cy = a.y + t * dy + d * ny;
  return str(
      "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\" "
      "fill=\"%s\">%s</text>\n",
      cx, cy + 3.5, colour, engine::xml_escape(text).c_str());  // the baseline under the centre
}

std::string arrow(const AlgoRun& run, int from, int to, comm::Range r, bool reduce) {
  const int W = run.cfg.world;
  Pt a = at(from, W), b = at(to, W);
  const double dx = b.x - a.x, dy = b.y - a.y, len = std::max(1.0, std::hypot(dx, dy));
  const double ux = dx / len, uy = dy / len, off = 5;  // two arrows between a pair stay apart
  a = {a.x + 16 * ux - off * uy, a.y + 16 * uy + off * ux};
  b = {b.x - 18 * ux - off * uy, b.y - 18 * uy + off * ux};
  const char* colour = reduce ? "#d9480f" : "#2b8a3e";
  return str("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
             "stroke-width=\"2\" marker-end=\"url(#head%s)\"/>\n",
             a.x, a.y, b.x, b.y, colour, reduce ? "R" : "C") +
         label(a, b, str("[%zu,%zu)", r.begin, r.end), colour);
}

std::string panel(const AlgoRun& run, size_t k) {
  const AlgoRound& rd = run.rounds[k];
  const int W = run.cfg.world;
  std::string s = str("<text x=\"10\" y=\"18\" font-size=\"13\">round %d: %s</text>\n", rd.round,
                      engine::xml_escape(rd.phase).c_str());
  for (const AlgoMove& m : rd.moves)
    if (m.send_to >= 0) {
      bool reduce = false;  // the receiver's record says whether it combined
      for (const AlgoMove& o : rd.moves)
        if (o.rank == m.send_to && o.recv_from == m.rank) reduce = o.reduced;
      s += arrow(run, m.rank, m.send_to, m.sent, reduce);
    }
  for (int r = 0; r < W; ++r) {
    const Pt p = at(r, W);
    s +=
        str("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"14\" fill=\"#f1f3f5\" stroke=\"#495057\"/>\n"
            "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">%d</text>\n",
            p.x, p.y, p.x, p.y + 4, r);
  }
  return s;
}

std::string defs() {
  std::string s = "<defs>\n";
  for (auto [id, colour] : {std::pair{"R", "#d9480f"}, std::pair{"C", "#2b8a3e"}})
    s +=
        str("<marker id=\"head%s\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"6\" "
            "markerHeight=\"6\" orient=\"auto\"><path d=\"M0,0 L10,5 L0,10 z\" "
            "fill=\"%s\"/></marker>\n",
            id, colour);
  return s + "</defs>\n";
}

std::string title(const AlgoRun& run) {
  return str("all_reduce by %s, %d ranks, %zu float32 each", comm::algo_name(run.algo),
             run.cfg.world, run.cfg.count);
}

std::string round_text(const AlgoRun& run, size_t k) {
  bool ok = true;
  const std::string full = algo_report(run, &ok);
  // The report's block for this round: from "round N (" to the next blank line.
  const std::string head = str("\nround %d (", run.rounds[k].round);
  const size_t b = full.find(head);
  if (b == std::string::npos) return "";
  const size_t e = full.find("\n\n", b + 1);
  return full.substr(b + 1, e == std::string::npos ? std::string::npos : e - b);
}

}  // namespace

std::string render_algo_svg(const AlgoRun& run) {
  const size_t n = run.rounds.size();
  const size_t rows = std::max<size_t>(1, (n + kPerRow - 1) / kPerRow);
  const double width = kW * std::min<size_t>(std::max<size_t>(n, 1), kPerRow);
  std::string s =
      str("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
          "font-family=\"sans-serif\">\n",
          width, 30 + rows * kH);
  s += defs();
  s += str("<text x=\"10\" y=\"20\" font-size=\"15\">%s: orange combines, green copies</text>\n",
           engine::xml_escape(title(run)).c_str());
  for (size_t k = 0; k < n; ++k)
    s += str("<g transform=\"translate(%.0f,%.0f)\">\n", kW * (k % kPerRow),
             30 + kH * (k / kPerRow)) +
         panel(run, k) + "</g>\n";
  return s + "</svg>\n";
}

std::string render_algo_html(const AlgoRun& run) {
  std::string s =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>" +
      engine::xml_escape(title(run)) +
      "</title>\n<style>\nbody { font-family: sans-serif; margin: 1em 2em; }\n"
      "pre { background: #f6f6f6; padding: 0.6em; overflow-x: auto; }\n"
      "button { font-size: 1em; padding: 0.2em 1em; }\n"
      ".frame { display: flex; flex-wrap: wrap; gap: 1.5em; align-items: flex-start; }\n"
      "</style>\n</head>\n<body>\n<h1>" +
      engine::xml_escape(title(run)) + "</h1>\n";
  s += "<div class=\"controls\"><button id=\"prev\" type=\"button\">Prev</button> "
       "<span id=\"pos\"></span> <button id=\"next\" type=\"button\">Next</button> "
       "(or the arrow keys, Home and End); orange arrows combine, green ones copy</div>\n";
  s += "<svg width=\"0\" height=\"0\">" + defs() + "</svg>\n";  // the arrow heads, once
  for (size_t k = 0; k < run.rounds.size(); ++k) {
    s += str("<div class=\"frame\" id=\"frame%zu\">\n", k);
    s += str("<svg width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\">\n", kW, kH) +
         panel(run, k) + "</svg>\n";
    s += "<pre>" + engine::xml_escape(round_text(run, k)) + "</pre>\n</div>\n";
  }
  bool ok = true;
  s += "<h2>The whole run</h2>\n<pre>" + engine::xml_escape(algo_report(run, &ok)) + "</pre>\n";
  s += frame_script();
  return s + "</body>\n</html>\n";
}

}  // namespace engine::ring_demo
