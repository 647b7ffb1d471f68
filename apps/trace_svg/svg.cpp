// apps/trace_svg/svg.cpp: see svg.h.
#include "apps/trace_svg/svg.h"

#include <cmath>
#include <cstdlib>

namespace engine::trace_svg {

const char* category_colour(const std::string& category) {
  // Tableau 10: distinct for people with the common colour-vision deficiencies too.
  if (category == "step") return "#cfcac6";
  if (category == "data") return "#76b7b2";
  if (category == "forward") return "#4e79a7";
  if (category == "backward") return "#f28e2b";
  if (category == "comm") return "#e15759";
  if (category == "optimizer") return "#59a14f";
  if (category == "eval") return "#b07aa1";
  return "#9c755f";
}

namespace {
int channel(const std::string& c, int i) {
  return static_cast<int>(std::strtol(c.substr(1 + 2 * i, 2).c_str(), nullptr, 16));
}
}  // namespace

std::string lighten(const std::string& c, double f) {
  int rgb[3];
  for (int i = 0; i < 3; ++i)
    rgb[i] = static_cast<int>(std::lround(channel(c, i) + (255 - channel(c, i)) * f));
  return fmt("#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
}

const char* text_colour_on(const std::string& c) {
  const double lum = (0.299 * channel(c, 0) + 0.587 * channel(c, 1) + 0.114 * channel(c, 2)) / 255;
  return lum > 0.6 ? "#222" : "#fff";
}

double text_width(const std::string& s, double size) {
  double w = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) == 0x80) continue;
    // Narrow letters and punctuation, wide capitals, the rest average (Helvetica-like metrics).
    if (c == 'i' || c == 'l' || c == 'j' || c == 't' || c == 'f' || c == 'r' || c == '.' ||
        c == ' ' || c == '(' || c == ')' || c == 'I')
      w += 0.33;
    else if (c == 'm' || c == 'w' || c == 'M' || c == 'W')
      w += 0.86;
    else if (c >= 'A' && c <= 'Z')
      w += 0.70;
    else
      w += 0.57;
  }
  return w * size;
}

std::string truncate_to(const std::string& s, double width, double size) {
  if (text_width(s, size) <= width) return s;
  for (size_t n = s.size(); n >= 2; --n) {
    if ((static_cast<unsigned char>(s[n - 1]) & 0xC0) == 0x80) continue;  // mid-character
    std::string t = s.substr(0, n - 1) + "\u2026";
    if (text_width(t, size) <= width) return n - 1 >= 2 ? t : "";
  }
  return "";
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  std::vector<double> out;
  if (!(hi > lo) || target < 1) return out;
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
    out.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  return out;
}

std::string tick_label(double v) {
  return fmt("%.6g", v);
}

}  // namespace engine::trace_svg
