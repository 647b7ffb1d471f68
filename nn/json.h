// nn/json.h: a small JSON value, parser and writer. Owns safetensors headers, metrics JSON lines
// and Chrome trace files. Objects keep insertion order; numbers keep an exact int64 when integral.
//
//   Json ev = Json::object().set("name", "allreduce").set("ts", 12).set("loss", 0.25f);
//   std::string line = ev.dump();               // {"name":"allreduce","ts":12,"loss":0.25}
//   Json back = Json::parse(line);              // throws engine::Error naming the byte offset
//   int64_t ts = back.at("ts").as_int();
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace engine {

class Json {
 public:
  enum class Type : uint8_t { Null, Bool, Number, String, Array, Object };
  using Member = std::pair<std::string, Json>;

  Json() = default;  // null
  Json(std::nullptr_t) {}
  Json(bool b) : type_(Type::Bool), bool_(b) {}
  Json(int v) : Json(IntTag{}, v) {}
  Json(long v) : Json(IntTag{}, v) {}
  Json(long long v) : Json(IntTag{}, v) {}
  Json(unsigned v) : Json(IntTag{}, v) {}
  Json(unsigned long v);       // throws when above INT64_MAX
  Json(unsigned long long v);  // throws when above INT64_MAX
  Json(double v) : type_(Type::Number), num_(v) {}
  // A float prints as the shortest text that reads back to the same float ("0.1", not
  // "0.10000000149011612").
  Json(float v) : type_(Type::Number), single_(true), num_(v) {}
  Json(const char* s) : type_(Type::String), str_(s) {}
  Json(std::string s) : type_(Type::String), str_(std::move(s)) {}
  Json(std::string_view s) : type_(Type::String), str_(s) {}

  static Json array();
  static Json object();
  template <class T>
  static Json array_of(const std::vector<T>& xs) {
    Json a = array();
    for (const T& x : xs) a.push_back(Json(x));
    return a;
  }

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::Null; }
  bool is_bool() const { return type_ == Type::Bool; }
  bool is_number() const { return type_ == Type::Number; }
  // A number with an exact int64 value: written without '.' or 'e' and in range.
  bool is_int() const { return type_ == Type::Number && int_; }
  bool is_string() const { return type_ == Type::String; }
  bool is_array() const { return type_ == Type::Array; }
  bool is_object() const { return type_ == Type::Object; }

  // Accessors throw engine::Error when the value has another type.
  bool as_bool() const;
  double as_double() const;
  int64_t as_int() const;
  const std::string& as_string() const;
  const std::vector<Json>& items() const;      // array elements
  const std::vector<Member>& members() const;  // object members, in insertion order

  size_t size() const;  // elements of an array or members of an object
  const Json& operator[](size_t i) const;
  const Json* find(std::string_view key) const;  // nullptr when absent (or not an object)
  const Json& at(std::string_view key) const;    // throws naming the key when absent

  Json& push_back(Json v);             // arrays; returns *this to chain
  Json& set(std::string key, Json v);  // objects: replaces an existing key, else appends

  // Compact text (indent < 0) or pretty text with `indent` spaces per level. Non-finite numbers
  // are written as null: JSON has no NaN or Infinity.
  std::string dump(int indent = -1) const;
  // Parses one JSON text; surrounding whitespace is allowed. Rejects duplicate object keys,
  // invalid UTF-8, raw control characters in strings and nesting deeper than 512.
  static Json parse(std::string_view text);

  friend bool operator==(const Json& a, const Json& b);

 private:
  friend class JsonParser;
  void dump_to(std::string& out, int indent, int depth) const;

  Type type_ = Type::Null;
  bool bool_ = false;
  bool int_ = false;     // i64_ holds the exact value
  bool single_ = false;  // print with float precision
  double num_ = 0.0;
  int64_t i64_ = 0;
  std::string str_;
  std::vector<Json> arr_;
  std::vector<Member> obj_;

  struct IntTag {};
  Json(IntTag, int64_t v)
      : type_(Type::Number), int_(true), num_(static_cast<double>(v)), i64_(v) {}
};

// Appends `s` to `out` as a quoted JSON string with escapes.
void json_escape(std::string& out, std::string_view s);

}  // namespace engine
