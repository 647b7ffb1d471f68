// apps/launch/line_prefixer.cpp: see line_prefixer.h.
#include "apps/launch/line_prefixer.h"

namespace engine::launch {

void LinePrefixer::emit(std::string_view line, std::string& out) {
  out += prefix_;
  out += line;
}

void LinePrefixer::feed(std::string_view bytes, std::string& out) {
  partial_ += bytes;
  size_t start = 0;
  for (size_t i = 0; i < partial_.size(); ++i) {
    const char c = partial_[i];
    if (c == '\r') {
      if (i + 1 == partial_.size()) break;  // a '\n' may follow in the next read
      if (partial_[i + 1] == '\n') ++i;
    } else if (c != '\n') {
      if (i + 1 - start < kMaxLine) continue;
      emit(std::string_view(partial_).substr(start, i + 1 - start), out);
      out += '\n';
      start = i + 1;
      continue;
    }
    emit(std::string_view(partial_).substr(start, i + 1 - start), out);
    start = i + 1;
  }
  partial_.erase(0, start);
}

void LinePrefixer::flush(std::string& out) {
  if (partial_.empty()) return;
  emit(partial_, out);
  out += '\n';
  partial_.clear();
}

}  // namespace engine::launch
