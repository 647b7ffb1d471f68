// io/json.h: JSON through nlohmann-json (third_party_notes/nlohmann-json.md). Owns how the engine
// reads JSON (safetensors headers, trace files): errors name the source and the byte, and what
// nlohmann accepts but a strict reader must not (duplicate keys, absurd nesting) is rejected.
//
//   Json ev = {{"name", "allreduce"}, {"ts", 12}, {"loss", 0.25}};
//   std::string line = dump_json(ev);                // {"name":"allreduce","ts":12,"loss":0.25}
//   Json back = parse_json(line, "metrics.jsonl");   // throws engine::Error naming the file
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace engine {

// Objects keep insertion order, so what we write reads in the order we wrote it, and a file's
// members come back in file order (safetensors entries are listed in header order).
using Json = nlohmann::ordered_json;

// The deepest nesting parse_json accepts.
inline constexpr int kMaxJsonDepth = 512;

// Parses one JSON text (surrounding whitespace allowed). Throws engine::Error
// "<source>: not valid JSON: ..." naming the byte offset for a syntax error, and for a number
// beyond double's range, a duplicate object key or nesting deeper than kMaxJsonDepth (the last
// two nlohmann alone would accept).
Json parse_json(std::string_view text, const std::string& source);

// Compact text (indent < 0) or pretty text with `indent` spaces per level. Non-finite numbers are
// written as null (JSON has no NaN or Infinity); bytes that are not UTF-8 become U+FFFD.
std::string dump_json(const Json& v, int indent = -1);

}  // namespace engine
