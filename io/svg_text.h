// io/svg_text.h: the text helpers every SVG/HTML writer shares (ring_demo's pictures, train's
// loss plot, trace_svg): printf into a std::string, and XML escaping.
#pragma once
#include <cstdio>
#include <string>

namespace engine {

template <class... Args>
std::string fmt(const char* f, Args... args) {
  std::string out(static_cast<size_t>(std::snprintf(nullptr, 0, f, args...)), '\0');
  std::snprintf(out.data(), out.size() + 1, f, args...);
  return out;
}

// Text for XML character data and attribute values: markup characters as entities, control
// characters other than tab and newline dropped (they are not allowed in XML 1.0).
inline std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\n' || c == '\t') out += c;
    }
  }
  return out;
}

}  // namespace engine
