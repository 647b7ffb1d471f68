// apps/launch/line_prefixer.h: cuts one rank's output stream into whole lines, each prefixed with
// "[rank R] ", so lines of different ranks never mix mid-line.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace engine::launch {

class LinePrefixer {
 public:
  explicit LinePrefixer(std::string prefix) : prefix_(std::move(prefix)) {}

  // Appends to `out` every line completed by `bytes`. A line ends at '\n', "\r\n" or a lone '\r'
  // (progress bars redraw with '\r'), and the ending is kept. A line longer than kMaxLine is cut.
  void feed(std::string_view bytes, std::string& out);
  // Appends the partial last line, if any, ending it with '\n'. Called at end of stream.
  void flush(std::string& out);

  static constexpr size_t kMaxLine = 64 * 1024;

 private:
  void emit(std::string_view line, std::string& out);

  std::string prefix_;
  std::string partial_;  // bytes after the last line ending seen
};

}  // namespace engine::launch
