// io/json.cpp: see json.h.
#include "io/json.h"

#include <set>
#include <vector>

#include "io/error.h"

namespace engine {
namespace {

// nlohmann's messages start with "[json.exception.parse_error.101] "; keep the words after it.
std::string reason(const nlohmann::json::exception& e) {
  std::string_view w = e.what();
  const size_t close = w.find("] ");
  return std::string(close == std::string_view::npos ? w : w.substr(close + 2));
}

// Rejects duplicate keys and deep nesting while nlohmann parses. keys[d] holds the keys seen so
// far in the object at depth d - 1 (nlohmann reports a key at its object's depth + 1).
class StrictCallback {
 public:
  explicit StrictCallback(const std::string& source) : source_(source) {}
  bool operator()(int depth, Json::parse_event_t event, Json& parsed) {
    using E = Json::parse_event_t;
    if (event == E::object_start || event == E::array_start) {
      ENGINE_CHECK(depth < kMaxJsonDepth, source_, ": not valid JSON: nesting deeper than ",
                   kMaxJsonDepth);
      if (event == E::object_start) {
        if (keys_.size() < static_cast<size_t>(depth) + 2) keys_.resize(depth + 2);
        keys_[depth + 1].clear();
      }
    } else if (event == E::key) {
      const std::string& k = parsed.get_ref<const std::string&>();
      ENGINE_CHECK(keys_[depth].insert(k).second, source_, ": not valid JSON: duplicate key \"", k,
                   "\"");
    }
    return true;
  }

 private:
  const std::string& source_;
  std::vector<std::set<std::string>> keys_;
};

}  // namespace

Json parse_json(std::string_view text, const std::string& source) {
  StrictCallback strict(source);
  try {
    return Json::parse(text.begin(), text.end(), std::ref(strict));
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte counts the characters read, the offending one included: its offset is one less.
    ENGINE_FAIL(source, ": not valid JSON: at byte ", e.byte == 0 ? 0 : e.byte - 1, ": ",
                reason(e));
  } catch (const nlohmann::json::exception& e) {  // a number beyond double's range: "overflow"
    ENGINE_FAIL(source, ": not valid JSON: ", reason(e));
  }
}

std::string dump_json(const Json& v, int indent) {
  return v.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace engine
