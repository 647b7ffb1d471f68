// report/progress.cpp: see progress.h.
#include "report/progress.h"

#include <sys/ioctl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace engine::report {
namespace {

constexpr int kBarMax = 30, kBarMin = 10;

template <class... Args>
std::string str(const char* f, Args... args) {
  std::string out(static_cast<size_t>(std::snprintf(nullptr, 0, f, args...)), '\0');
  std::snprintf(out.data(), out.size() + 1, f, args...);
  return out;
}

// One way of writing the line, from the longest to the shortest.
struct Style {
  bool rank, long_speed, wide_gaps, left_word;  // the long forms
  bool speed, left, loss, bar;                  // the fields shown
};
constexpr Style kStyles[] = {
    {true, true, true, true, true, true, true, true},
    {true, false, true, true, true, true, true, true},
    {false, false, true, true, true, true, true, true},
    {false, false, false, false, true, true, true, true},
    {false, false, false, false, false, true, true, true},
    {false, false, false, false, false, false, true, true},
    {false, false, false, false, false, false, false, true},
    {false, false, false, false, false, false, false, false},
};

std::string bar_text(const ProgressState& s, int width) {
  const int64_t filled =
      std::clamp<int64_t>(width * s.done / std::max<int64_t>(1, s.end), 0, width);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(static_cast<size_t>(width), '.');
  return bar;
}

// The line in style st, with a bar `bar` wide (0: none).
std::string compose(const ProgressState& s, const Style& st, int bar) {
  const std::string gap = st.wide_gaps ? "  " : " ";
  const long long epoch = s.epoch;
  std::string out = st.rank ? str("Rank %d, epoch %lld", s.rank, epoch) : str("epoch %lld", epoch);
  if (bar > 0) out += " [" + bar_text(s, bar) + "]";
  // The count as wide as its end, so that the bar keeps its width as the count grows.
  const int width = static_cast<int>(std::to_string(s.end).size());
  out += str(" %*lld/%lld", width, static_cast<long long>(s.done), static_cast<long long>(s.end));
  if (st.loss) out += gap + str("loss %.4f", s.loss);
  if (st.speed) out += gap + str(st.long_speed ? "%.0f images/s" : "%.0f img/s", s.images_per_s);
  if (st.left) out += gap + str(st.left_word ? "%.0fs left" : "%.0fs", s.seconds_left);
  return out;
}

}  // namespace

int64_t progress_end(int64_t batches, int64_t first, int64_t steps_left) {
  if (steps_left < 0) return batches;
  return std::min(batches, first + steps_left);
}

std::string progress_bar_line(const ProgressState& s, int columns) {
  const size_t room = static_cast<size_t>(std::max(1, columns - 1));
  for (const Style& st : kStyles) {
    if (!st.bar) {
      std::string line = compose(s, st, 0);
      if (line.size() <= room) return line;
      continue;
    }
    const size_t fixed = compose(s, st, 0).size() + 3;  // " [" and "]" around the bar
    if (fixed + kBarMin <= room)
      return compose(s, st, static_cast<int>(std::min<size_t>(kBarMax, room - fixed)));
  }
  return str("%lld/%lld", static_cast<long long>(s.done), static_cast<long long>(s.end))
      .substr(0, room);
}

std::string progress_plain_line(const ProgressState& s) {
  return str("Rank %d, epoch %lld, batch %lld/%lld: loss %.4f, %.0f images/s, %.0fs left", s.rank,
             static_cast<long long>(s.epoch), static_cast<long long>(s.done),
             static_cast<long long>(s.end), s.loss, s.images_per_s, s.seconds_left);
}

int terminal_columns(int fd, const char* columns_env) {
  winsize ws{};
  if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (columns_env && *columns_env) {
    char* end = nullptr;
    const long v = std::strtol(columns_env, &end, 10);
    if (*end == 0 && v > 0 && v <= 10000) return static_cast<int>(v);
  }
  return 80;
}

}  // namespace engine::report
