// report/training_plot.cpp: see training_plot.h. Plain SVG 1.1: lines, polylines, circles and
// text; no script.
#include "report/training_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "io/atomic_file.h"
#include "io/svg_text.h"

namespace engine::report {
namespace {

constexpr double kWidth = 820, kHeight = 610;
constexpr double kLeft = 72, kRight = 28;           // plot area margins
constexpr double kLossTop = 48, kLossHeight = 300;  // the panels: loss on top, accuracy below
constexpr double kAccTop = 392, kAccHeight = 170;
constexpr const char* kLossColour = "#1f77b4";
constexpr const char* kLossLight = "#a6c8e6";
constexpr const char* kAccColour = "#d62728";

std::string str(const char* f, auto... args) {
  return fmt(f, args...);
}
std::string esc(const std::string& s) {
  return xml_escape(s);
}

std::string label(double v) {
  return str("%.6g", std::fabs(v) < 1e-12 ? 0.0 : v);
}

// A rectangle of the picture with data ranges: maps data to pixels.
struct Panel {
  double top, height;
  double x0, x1, y0, y1;  // data ranges
  double px(double x) const { return kLeft + (x - x0) / (x1 - x0) * (kWidth - kLeft - kRight); }
  double py(double y) const { return top + height - (y - y0) / (y1 - y0) * height; }
};

// Frame, grid, ticks and axis titles of a panel.
std::string axes(const Panel& p, const std::vector<double>& xt, const std::vector<double>& yt,
                 const std::string& ytitle, const char* ysuffix, bool xlabels) {
  std::string s;
  const double left = kLeft, right = kWidth - kRight, bottom = p.top + p.height;
  for (double y : yt) {
    s += str("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>", left,
             p.py(y), right, p.py(y));
    s += str("<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s%s</text>\n",
             left - 6, p.py(y) + 4, label(y).c_str(), ysuffix);
  }
  for (double x : xt) {
    s += str("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>", p.px(x),
             p.top, p.px(x), bottom);
    s += str("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>", p.px(x),
             bottom, p.px(x), bottom + 4);
    if (xlabels)
      s += str("<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%s</text>\n",
               p.px(x), bottom + 16, label(x).c_str());
  }
  s +=
      str("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
          "stroke=\"#333\"/>\n",
          left, p.top, right - left, p.height);
  s += str("<text x=\"18\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\" "
           "transform=\"rotate(-90 18 %.1f)\">",
           p.top + p.height / 2, p.top + p.height / 2) +
       esc(ytitle) + "</text>\n";
  return s;
}

std::string polyline(const std::vector<std::pair<double, double>>& pts, const char* colour,
                     double width) {
  if (pts.empty()) return "";
  std::string s = "<polyline fill=\"none\" stroke-linejoin=\"round\" stroke=\"";
  s += colour;
  s += str("\" stroke-width=\"%.1f\" points=\"", width);
  for (auto& [x, y] : pts) s += str("%.1f,%.1f ", x, y);
  s.back() = '"';
  return s + "/>\n";
}

std::string no_data(const Panel& p, const char* what) {
  return str(
      "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" fill=\"#888\" "
      "text-anchor=\"middle\">%s</text>\n",
      (kLeft + kWidth - kRight) / 2, p.top + p.height / 2, what);
}

// Finite (step, loss) points; steps count from 1.
std::vector<std::pair<double, double>> finite_points(const std::vector<double>& v) {
  std::vector<std::pair<double, double>> out;
  for (size_t i = 0; i < v.size(); ++i)
    if (std::isfinite(v[i])) out.push_back({static_cast<double>(i + 1), v[i]});
  return out;
}

// Pixels of a data series; with more points than pixels, each pixel column keeps its min and max
// so that spikes stay visible.
std::vector<std::pair<double, double>> to_pixels(
    const Panel& p, const std::vector<std::pair<double, double>>& pts) {
  std::vector<std::pair<double, double>> out;
  const size_t columns = static_cast<size_t>(kWidth - kLeft - kRight);
  if (pts.size() <= 2 * columns) {
    for (auto& [x, y] : pts) out.push_back({p.px(x), p.py(y)});
    return out;
  }
  long col = -1;
  double lo = 0, hi = 0, cx = 0;
  auto flush = [&] {
    if (col >= 0) {
      out.push_back({cx, p.py(hi)});
      out.push_back({cx, p.py(lo)});
    }
  };
  for (auto& [x, y] : pts) {
    const long c = std::lround(p.px(x));
    if (c != col) {
      flush();
      col = c;
      cx = static_cast<double>(c);
      lo = hi = y;
    }
    lo = std::min(lo, y);
    hi = std::max(hi, y);
  }
  flush();
  return out;
}

// The mean of the last `window` points at each point.
std::vector<std::pair<double, double>> moving_average(
    const std::vector<std::pair<double, double>>& pts, size_t window) {
  std::vector<std::pair<double, double>> out;
  double sum = 0;
  for (size_t i = 0; i < pts.size(); ++i) {
    sum += pts[i].second;
    if (i >= window) sum -= pts[i - window].second;
    if (i + 1 >= window) out.push_back({pts[i].first, sum / static_cast<double>(window)});
  }
  return out;
}

// Keeps the axis inside [floor_v, ceil_v] when the data are: accuracy never shows 110 %.
std::vector<double> clamp_ticks(std::vector<double> t, double floor_v, double ceil_v) {
  std::vector<double> out;
  for (double v : t)
    if (v >= floor_v - 1e-9 && v <= ceil_v + 1e-9) out.push_back(v);
  if (out.empty() || out.front() > t.front()) out.insert(out.begin(), floor_v);
  if (out.back() < t.back()) out.push_back(ceil_v);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (hi < lo) std::swap(lo, hi);
  if (hi - lo < 1e-12 * std::max(1.0, std::fabs(hi))) {
    const double pad = std::max(0.5, std::fabs(hi) * 0.05);
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  const double step = (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
  const double first = std::floor(lo / step + 1e-9), last = std::ceil(hi / step - 1e-9);
  std::vector<double> out;
  for (double k = first; k <= last; k += 1) out.push_back(k * step);
  return out;
}

namespace {

// The step axis: round ticks from 0 to the last step, whole numbers only.
std::vector<double> step_ticks(const std::vector<double>& step_loss,
                               const std::vector<std::pair<int64_t, double>>& epoch_acc) {
  double x_max = static_cast<double>(step_loss.size());
  for (auto& [step, acc] : epoch_acc) x_max = std::max(x_max, static_cast<double>(step));
  std::vector<double> xt = nice_ticks(0, std::max(1.0, x_max), 8);
  if (xt[1] - xt[0] < 1) {  // steps are whole numbers
    xt.clear();
    for (double x = 0; x <= std::max(1.0, x_max); x += 1) xt.push_back(x);
  }
  return xt;
}

// The document's opening: XML declaration, <svg>, white background and the title.
std::string svg_head(const std::string& title) {
  std::string s =
      str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
          "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n"
          "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n",
          kWidth, kHeight, kWidth, kHeight);
  return s +
         str("<text x=\"%.1f\" y=\"26\" font-size=\"16\" font-weight=\"bold\" "
             "text-anchor=\"middle\">",
             kWidth / 2) +
         esc(title) + "</text>\n";
}

// The top panel: loss per step, and its moving average when there are many steps.
std::string loss_panel(const std::vector<double>& step_loss, const std::vector<double>& xt) {
  const auto loss = finite_points(step_loss);
  const size_t skipped = step_loss.size() - loss.size();
  double lo = 0, hi = 1;
  if (!loss.empty()) {
    lo = hi = loss[0].second;
    for (auto& [x, y] : loss) lo = std::min(lo, y), hi = std::max(hi, y);
    lo = std::min(lo, 0.0);
  }
  const std::vector<double> lt = nice_ticks(lo, hi, 6);
  const Panel lp{kLossTop, kLossHeight, xt.front(), xt.back(), lt.front(), lt.back()};
  std::string s = axes(lp, xt, lt, "training loss", "", false);
  if (loss.empty()) return s + no_data(lp, "no loss recorded");
  const size_t window = loss.size() > 50 ? std::max<size_t>(2, loss.size() / 25) : 0;
  s += polyline(to_pixels(lp, loss), window ? kLossLight : kLossColour, window ? 1 : 1.8);
  std::string legend = "loss per step";
  if (window) {
    s += polyline(to_pixels(lp, moving_average(loss, window)), kLossColour, 2.2);
    legend += str(" (light), mean of the last %zu steps (dark)", window);
  }
  if (skipped) legend += str("; %zu non-finite skipped", skipped);
  return s +
         str("<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\" fill=\"%s\">",
             kWidth - kRight - 8, lp.top + 16, kLossColour) +
         esc(legend) + "</text>\n";
}

// The bottom panel's points: test accuracy per epoch in percent (fractions when all are <= 1).
std::vector<std::pair<double, double>> accuracy_points(
    const std::vector<std::pair<int64_t, double>>& epoch_acc) {
  bool fraction = true;
  for (auto& [step, acc] : epoch_acc) fraction = fraction && acc <= 1.0;
  std::vector<std::pair<double, double>> acc;
  for (auto& [step, a] : epoch_acc)
    if (std::isfinite(a)) acc.push_back({static_cast<double>(step), fraction ? a * 100 : a});
  return acc;
}

// The bottom panel: test accuracy after each epoch, a labelled point each.
std::string accuracy_panel(const std::vector<std::pair<int64_t, double>>& epoch_acc,
                           const std::vector<double>& xt) {
  const std::vector<std::pair<double, double>> acc = accuracy_points(epoch_acc);
  double alo = 0, ahi = 100;
  if (!acc.empty()) {
    alo = ahi = acc[0].second;
    for (auto& [x, y] : acc) alo = std::min(alo, y), ahi = std::max(ahi, y);
    const double pad = std::max(1.0, (ahi - alo) * 0.15);
    alo = std::max(0.0, alo - pad);
    ahi = std::min(100.0, ahi + pad);
  }
  const std::vector<double> at = clamp_ticks(nice_ticks(alo, ahi, 4), 0.0, 100.0);
  const Panel ap{kAccTop, kAccHeight, xt.front(), xt.back(), at.front(), at.back()};
  std::string s = axes(ap, xt, at, "test accuracy", "%", true);
  if (acc.empty()) return s + no_data(ap, "no test accuracy yet");
  std::vector<std::pair<double, double>> px;
  for (auto& [x, y] : acc) px.push_back({ap.px(x), ap.py(y)});
  s += polyline(px, kAccColour, 1.5);
  for (size_t i = 0; i < acc.size(); ++i) {
    s += str("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>", px[i].first, px[i].second,
             kAccColour);
    if (acc.size() <= 20)
      s +=
          str("<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\" "
              "fill=\"%s\">%.2f%%</text>",
              px[i].first, px[i].second - 7, kAccColour, acc[i].second);
    s += "\n";
  }
  return s + str("<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\" fill=\"%s\">"
                 "after each epoch (%zu)</text>\n",
                 kWidth - kRight - 8, ap.top + ap.height - 8, kAccColour, acc.size());
}

}  // namespace

std::string training_plot_svg(const std::vector<double>& step_loss,
                              const std::vector<std::pair<int64_t, double>>& epoch_acc,
                              const std::string& title) {
  const std::vector<double> xt = step_ticks(step_loss, epoch_acc);
  return svg_head(title) + loss_panel(step_loss, xt) + accuracy_panel(epoch_acc, xt) +
         str("<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">step</text>\n",
             (kLeft + kWidth - kRight) / 2, kAccTop + kAccHeight + 34) +
         "</svg>\n";
}

void write_training_plot(const std::string& path, const std::vector<double>& step_loss,
                         const std::vector<std::pair<int64_t, double>>& epoch_acc,
                         const std::string& title) {
  write_file_atomic(path, training_plot_svg(step_loss, epoch_acc, title));
}

}  // namespace engine::report
