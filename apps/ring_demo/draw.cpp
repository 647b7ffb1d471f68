// apps/ring_demo/draw.cpp: see draw.h. Geometry: rank r sits at angle -90 + 360 r / W degrees
// (rank 0 on top, clockwise); each transfer is an arc of the ring from the sender's box to its
// right neighbour's.
#include "apps/ring_demo/draw.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>

#include "apps/ring_demo/report.h"
#include "io/svg_text.h"

namespace engine::ring_demo {
namespace {

constexpr double kPi = std::numbers::pi;
constexpr const char* kScatterColour = "#d9480f";  // reduce-scatter arrows: add
constexpr const char* kGatherColour = "#2b8a3e";   // all-gather arrows: copy

// Steps through the frames. No '<' or '&' in it, so that the page is also well-formed XML.
constexpr const char* kScript = R"(<script>
(function () {
  var steps = document.querySelectorAll('.frame');
  var cur = 0;
  function show(i) {
    cur = Math.max(0, Math.min(steps.length - 1, i));
    for (var k = 0; steps.length > k; k++)
      steps[k].style.display = k === cur ? 'flex' : 'none';
    document.getElementById('pos').textContent = 'frame ' + (cur + 1) + ' of ' + steps.length;
    document.getElementById('prev').disabled = cur === 0;
    document.getElementById('next').disabled = cur === steps.length - 1;
  }
  document.getElementById('prev').onclick = function () { show(cur - 1); };
  document.getElementById('next').onclick = function () { show(cur + 1); };
  var keys = {ArrowLeft: -1, ArrowRight: 1, Home: 'first', End: 'last'};
  document.addEventListener('keydown', function (e) {
    var k = keys[e.key];
    if (k === undefined || e.altKey || e.ctrlKey || e.metaKey || e.shiftKey) return;
    e.preventDefault();  // the page handles the key: it must not also scroll the page
    show(k === 'first' ? 0 : k === 'last' ? steps.length - 1 : cur + k);
  });
  show(0);
})();
</script>
)";

std::string str(const char* f, auto... args) {
  return engine::fmt(f, args...);
}
std::string esc(const std::string& s) {
  return engine::xml_escape(s);
}

std::string rank_colour(int r) {
  static const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
                                   "#b07aa1", "#ff9da7", "#9c755f", "#1f77b4", "#17becf", "#bcbd22",
                                   "#8c564b", "#7f3c8d", "#11a579", "#3969ac"};
  if (r < 16) return kPalette[r];
  return str("hsl(%d,60%%,50%%)", (r * 137) % 360);
}

// Sizes of one panel, from the world size.
struct Layout {
  int W = 1;
  double cw = 0, sh = 0;  // chunk column width, height of one rank's slot in it
  double bw = 0, bh = 0;  // rank box
  double R = 0;           // ring radius
  double pw = 0, ph = 0;  // panel
  double title_h = 22;
  double label_h = 0;  // chunk names under the columns, when there is room

  explicit Layout(int world) : W(world) {
    cw = std::clamp(96.0 / W, 5.0, 14.0);
    sh = std::clamp(40.0 / W, 2.0, 8.0);
    bw = std::max(W * (cw + 2) + 10, 52.0);
    label_h = cw >= 9 ? 9 : 0;
    bh = 18 + W * sh + 8 + label_h;
    const double hd = std::hypot(bw / 2, bh / 2);
    R = std::max({70.0, bh + 30, W * (2 * hd + 36) / (2 * kPi)});
    if (W == 1) R = 0;
    pw = 2 * (R + bw / 2 + 24);
    ph = 2 * (R + bh / 2 + 24) + title_h;
  }
  double cx() const { return pw / 2; }
  double cy() const { return title_h + (ph - title_h) / 2; }
  double angle(double r) const { return -kPi / 2 + 2 * kPi * r / W; }
  double px(double r, double radius) const { return cx() + radius * std::cos(angle(r)); }
  double py(double r, double radius) const { return cy() + radius * std::sin(angle(r)); }
  // Half the angle a box takes on the ring, with a margin for the arrow head.
  double box_half_angle() const {
    const double hd = std::hypot(bw / 2, bh / 2) + 6;
    return 2 * std::asin(std::min(1.0, hd / (2 * R)));
  }
};

std::string defs(const std::string& id) {
  std::string s = "<defs>";
  for (auto [name, colour] : {std::pair{"rs", kScatterColour}, std::pair{"ag", kGatherColour}})
    s += str(
        "<marker id=\"%s-%s\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" "
        "markerHeight=\"7\" orient=\"auto\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"%s\"/></marker>",
        id.c_str(), name, colour);
  return s + "</defs>\n";
}

// One rank's box: its name and one stacked column per chunk (slot q coloured when rank q's input
// is in that chunk); the chunk it just received outlined.
std::string rank_box(const DemoRun& run, const Frame& f, const Layout& L, int r) {
  const double x = L.px(r, L.R) - L.bw / 2, y = L.py(r, L.R) - L.bh / 2;
  std::string s = "<g>";
  if (run.values_shown)
    s += "<title>rank " + std::to_string(r) + ": " + esc(format_buffer(f.buffers[r], run.chunks)) +
         "</title>";
  s +=
      str("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" rx=\"4\" fill=\"#fff\" "
          "stroke=\"#555\"/>",
          x, y, L.bw, L.bh);
  s += str("<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">rank %d</text>",
           x + L.bw / 2, y + 13, r);
  const int received = f.is_start ? -1 : f.moves[r].recv_chunk;
  const char* colour = f.phase == comm::RingPhase::ReduceScatter ? kScatterColour : kGatherColour;
  for (int c = 0; c < L.W; ++c) {
    const double cx = x + 6 + c * (L.cw + 2), bottom = y + L.bh - 6 - L.label_h;
    if (L.label_h > 0)
      s +=
          str("<text x=\"%.1f\" y=\"%.1f\" font-size=\"7\" text-anchor=\"middle\" "
              "fill=\"#666\">c%d</text>",
              cx + L.cw / 2, bottom + 8, c);
    for (int q = 0; q < L.W; ++q) {
      const bool has = (f.holds[r][c] >> q) & 1;
      s += str("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>", cx,
               bottom - (q + 1) * L.sh, L.cw, L.sh, has ? rank_colour(q).c_str() : "#eee");
    }
    if (c == received)
      s +=
          str("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
              "stroke=\"%s\" stroke-width=\"2\"/>",
              cx - 1, bottom - L.W * L.sh - 1, L.cw + 2, L.W * L.sh + 2, colour);
  }
  return s + "</g>\n";
}

// An arc of the ring from rank r's box to its right neighbour's, labelled with the chunk.
std::string arrow(const DemoRun& run, const Frame& f, const Layout& L, const std::string& id,
                  const Move& m) {
  const bool rs = f.phase == comm::RingPhase::ReduceScatter;
  const double d = L.box_half_angle() / (2 * kPi / L.W);  // in units of one rank's sector
  const double a0 = m.rank + d, a1 = m.rank + 1 - d;
  const auto angle_of = [&](double r) { return L.angle(r); };
  const double x0 = L.cx() + L.R * std::cos(angle_of(a0)),
               y0 = L.cy() + L.R * std::sin(angle_of(a0));
  const double x1 = L.cx() + L.R * std::cos(angle_of(a1)),
               y1 = L.cy() + L.R * std::sin(angle_of(a1));
  std::string s = "<g>";
  std::string tip = str("rank %d sends chunk c%d to rank %d", m.rank, m.send_chunk, m.to);
  if (run.values_shown) tip += ": " + format_buffer(m.sent_values, {comm::Range{0, m.sent.size()}});
  s += "<title>" + esc(tip) + "</title>";
  s += str(
      "<path d=\"M%.1f,%.1f A%.1f,%.1f 0 0 1 %.1f,%.1f\" fill=\"none\" stroke=\"%s\" "
      "stroke-width=\"2\" marker-end=\"url(#%s-%s)\"/>",
      x0, y0, L.R, L.R, x1, y1, rs ? kScatterColour : kGatherColour, id.c_str(), rs ? "rs" : "ag");
  const double mid = m.rank + 0.5, lr = L.R + 13;
  s +=
      str("<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\" "
          "dominant-baseline=\"middle\" fill=\"%s\">c%d</text>",
          L.px(mid, lr), L.py(mid, lr), rs ? kScatterColour : kGatherColour, m.send_chunk);
  return s + "</g>\n";
}

// One frame as SVG elements (a panel of L.pw x L.ph at the origin); id makes marker ids unique.
std::string panel(const DemoRun& run, size_t frame, const Layout& L, const std::string& id) {
  const Frame& f = run.frames[frame];
  std::string s = defs(id);
  s +=
      str("<rect x=\"1\" y=\"1\" width=\"%.1f\" height=\"%.1f\" rx=\"6\" fill=\"#fafafa\" "
          "stroke=\"#ccc\"/>\n",
          L.pw - 2, L.ph - 2);
  std::string title = f.title;
  if (frame + 1 == run.frames.size() && run.cfg.world > 1) title += ": done";
  s +=
      str("<text x=\"%.1f\" y=\"16\" font-size=\"13\" font-weight=\"bold\" text-anchor=\"middle\">",
          L.pw / 2) +
      esc(title) + "</text>\n";
  if (L.W > 1)
    s += str("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"none\" stroke=\"#ddd\"/>\n", L.cx(),
             L.cy(), L.R);
  for (const Move& m : f.moves) s += arrow(run, f, L, id, m);
  for (int r = 0; r < L.W; ++r) s += rank_box(run, f, L, r);
  return s;
}

// Legend lines, then one swatch per rank; kLegendH tall.
constexpr double kLegendH = 80;
// The most height a frame's picture takes on the page.
constexpr double kFrameH = 420;
std::string legend(const DemoRun& run, double width, double y) {
  const int W = run.cfg.world;
  std::string s = str("<g transform=\"translate(10,%.1f)\" font-size=\"12\">", y);
  s +=
      str("<text x=\"0\" y=\"12\">Each box is a rank; its columns are the chunks c0..c%d, left "
          "to right. Slot q of a column (bottom = rank 0)</text>",
          W - 1);
  s += "<text x=\"0\" y=\"28\">is coloured once the chunk includes rank q's input. The outlined "
       "column is the chunk just received.</text>";
  s +=
      str("<text x=\"0\" y=\"44\"><tspan fill=\"%s\">Orange arrows</tspan>: reduce-scatter, "
          "the receiver combines the chunk into its own. <tspan fill=\"%s\">Green arrows</tspan>: "
          "all-gather, it stores it.</text>",
          kScatterColour, kGatherColour);
  const double step = std::min(70.0, (width - 20) / std::max(W, 1));
  for (int q = 0; q < W; ++q) {
    s += str("<rect x=\"%.1f\" y=\"54\" width=\"12\" height=\"12\" fill=\"%s\"/>", q * step,
             rank_colour(q).c_str());
    s += str("<text x=\"%.1f\" y=\"64\" font-size=\"11\">%s%d</text>", q * step + 15,
             step >= 50 ? "rank " : "", q);
  }
  return s + "</g>\n";
}

// How to read the picture, for the empty slot under the start panel.
std::string reading_guide(const Layout& L) {
  static const char* kLines[] = {"How to read it",
                                 "Reduce-scatter (upper panels): each",
                                 "step, every rank sends one chunk to",
                                 "its right neighbour, which combines",
                                 "it into its own copy. After W-1 steps",
                                 "each rank holds one complete chunk",
                                 "(a column in every colour).",
                                 "All-gather (lower panels): the complete",
                                 "chunks go once round the ring.",
                                 "Each rank sends 2(W-1)/W of its",
                                 "buffer in all, whatever W is."};
  std::string s;
  double y = L.title_h + 20;
  for (const char* line : kLines) {
    s += str("<text x=\"14\" y=\"%.1f\" font-size=\"%d\"%s>", y, line == kLines[0] ? 13 : 11,
             line == kLines[0] ? " font-weight=\"bold\"" : "") +
         esc(line) + "</text>\n";
    y += line == kLines[0] ? 20 : 15;
  }
  return s;
}

std::string heading(const DemoRun& run) {
  const Config& c = run.cfg;
  return str("Ring all-reduce of %zu float32 over %d rank%s (op %s)", c.count, c.world,
             c.world == 1 ? "" : "s", op_words(c.op).name);
}

}  // namespace

// Two sections: the start and the reduce-scatter steps, then the all-gather steps, each in rows of
// up to four panels; all-gather step s sits under reduce-scatter step s.
std::string render_svg(const DemoRun& run) {
  const Layout L(run.cfg.world);
  const int W = run.cfg.world;
  const int cols = std::min(W, 4), section_rows = (W + cols - 1) / cols;
  const int rows = W > 1 ? 2 * section_rows : 1;
  const double top = 44;
  const double width = std::max(cols * L.pw, 820.0), height = top + rows * L.ph + kLegendH;
  std::string s =
      str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
          "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n"
          "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n",
          width, height, width, height);
  s += "<text x=\"10\" y=\"20\" font-size=\"16\" font-weight=\"bold\">" + esc(heading(run)) +
       "</text>\n";
  s += "<text x=\"10\" y=\"37\" font-size=\"12\">" +
       esc(W > 1 ? "The start and the reduce-scatter steps, then the all-gather steps. Each rank "
                   "sends to its right neighbour (clockwise)."
                 : "One rank: nothing to exchange.") +
       "</text>\n";
  auto place = [&](int section, int pos, const std::string& body) {
    const int row = section * section_rows + pos / cols, col = pos % cols;
    return str("<g transform=\"translate(%.1f,%.1f)\">\n", col * L.pw, top + row * L.ph) + body +
           "</g>\n";
  };
  for (size_t k = 0; k < run.frames.size(); ++k) {
    const int ik = static_cast<int>(k);
    s += ik < W ? place(0, ik, panel(run, k, L, str("f%zu", k)))
                : place(1, ik - W + 1, panel(run, k, L, str("f%zu", k)));
  }
  if (W > 1) s += place(1, 0, reading_guide(L));
  s += legend(run, width, top + rows * L.ph + 4);
  return s + "</svg>\n";
}

const char* frame_script() {
  return kScript;
}

std::string render_html(const DemoRun& run) {
  const Layout L(run.cfg.world);
  bool ok = true;
  std::string s =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>" +
      esc(heading(run)) +
      "</title>\n<style>\nbody { font-family: sans-serif; margin: 1em 2em; }\n"
      "pre { background: #f6f6f6; padding: 0.6em; overflow-x: auto; }\n"
      ".controls { margin: 0.8em 0; font-size: 1.1em; }\n"
      "button { font-size: 1em; padding: 0.2em 1em; }\n"
      ".frame { display: flex; flex-wrap: wrap; gap: 1.5em; align-items: flex-start; }\n"
      ".frame pre { margin: 0; flex: 1 1 28em; min-width: 0; max-height: 75vh; overflow: auto; }\n"
      "</style>\n</head>\n<body>\n";
  // The first frame fits a 1280 x 800 window: heading, legend and controls above it, the
  // introduction below.
  s += "<h1>" + esc(heading(run)) + "</h1>\n";
  s += str("<svg width=\"820\" height=\"%.0f\" font-family=\"sans-serif\">", kLegendH) +
       legend(run, 820, 0) + "</svg>\n";
  s += "<div class=\"controls\"><button id=\"prev\" type=\"button\">Prev</button> "
       "<span id=\"pos\"></span> <button id=\"next\" type=\"button\">Next</button> "
       "(or the arrow keys, Home and End)</div>\n";
  // The picture beside its text, at most kFrameH tall.
  const double scale = std::min(std::clamp(520 / L.pw, 0.8, 1.6), kFrameH / L.ph);
  for (size_t k = 0; k < run.frames.size(); ++k) {
    s += "<div class=\"frame\" id=\"frame" + std::to_string(k) + "\">\n";
    s +=
        str("<svg width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
            "font-family=\"sans-serif\">\n",
            L.pw * scale, L.ph * scale, L.pw, L.ph);
    s += panel(run, k, L, str("f%zu", k)) + "</svg>\n";
    std::string text = describe_phase(run, k) + describe_frame(run, k);
    if (k + 1 == run.frames.size()) text += describe_result(run, &ok);
    s += "<pre>" + esc(text) + "</pre>\n</div>\n";
  }
  s += "<h2>How it runs</h2>\n<pre>" + esc(describe_intro(run)) + "</pre>\n";
  s += kScript;
  s += "</body>\n</html>\n";
  return s;
}

}  // namespace engine::ring_demo
