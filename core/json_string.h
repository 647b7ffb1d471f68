// core/json_string.h: JSON string literals, shared by the trace writer (core/trace) and the JSON
// library (nn/json), so there is one escaping rule.
#pragma once
#include <string>
#include <string_view>

namespace engine {

// Appends s to out as a JSON string literal (quotes included), escaping as RFC 8259 requires;
// UTF-8 bytes pass through.
void append_json_string(std::string& out, std::string_view s);

}  // namespace engine
