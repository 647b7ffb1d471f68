// nn/json.cpp: the JSON value, its writer and a strict recursive-descent parser (RFC 8259).
#include "nn/json.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <unordered_set>

#include "core/error.h"
#include "core/json_string.h"

namespace engine {

namespace {

const char* type_name(Json::Type t) {
  switch (t) {
    case Json::Type::Null:
      return "null";
    case Json::Type::Bool:
      return "bool";
    case Json::Type::Number:
      return "number";
    case Json::Type::String:
      return "string";
    case Json::Type::Array:
      return "array";
    case Json::Type::Object:
      return "object";
  }
  return "?";
}

const char* article(Json::Type t) {
  return t == Json::Type::Array || t == Json::Type::Object ? "an " : "a ";
}

void expect_type(Json::Type have, Json::Type want) {
  ENGINE_CHECK(have == want, "JSON value is ", article(have), type_name(have), ", expected ",
               article(want), type_name(want));
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

void newline(std::string& out, int indent, int depth) {
  if (indent < 0) return;
  out += '\n';
  out.append(static_cast<size_t>(indent) * depth, ' ');
}

}  // namespace

Json::Json(unsigned long v) : Json(static_cast<unsigned long long>(v)) {}
Json::Json(unsigned long long v) : type_(Type::Number), int_(true) {
  ENGINE_CHECK(v <= static_cast<unsigned long long>(std::numeric_limits<int64_t>::max()),
               "JSON integer ", v, " is above the int64 range");
  i64_ = static_cast<int64_t>(v);
  num_ = static_cast<double>(v);
}

Json Json::array() {
  Json j;
  j.type_ = Type::Array;
  return j;
}

Json Json::object() {
  Json j;
  j.type_ = Type::Object;
  return j;
}

bool Json::as_bool() const {
  expect_type(type_, Type::Bool);
  return bool_;
}

double Json::as_double() const {
  expect_type(type_, Type::Number);
  return num_;
}

int64_t Json::as_int() const {
  expect_type(type_, Type::Number);
  ENGINE_CHECK(int_, "JSON number ", num_, " is not an integer");
  return i64_;
}

const std::string& Json::as_string() const {
  expect_type(type_, Type::String);
  return str_;
}

const std::vector<Json>& Json::items() const {
  expect_type(type_, Type::Array);
  return arr_;
}

const std::vector<Json::Member>& Json::members() const {
  expect_type(type_, Type::Object);
  return obj_;
}

size_t Json::size() const {
  if (type_ == Type::Array) return arr_.size();
  if (type_ == Type::Object) return obj_.size();
  ENGINE_FAIL("JSON value is ", article(type_), type_name(type_), ", which has no size");
}

const Json& Json::operator[](size_t i) const {
  expect_type(type_, Type::Array);
  ENGINE_CHECK(i < arr_.size(), "JSON array index ", i, " out of range (size ", arr_.size(), ")");
  return arr_[i];
}

const Json* Json::find(std::string_view key) const {
  if (type_ != Type::Object) return nullptr;
  for (const Member& m : obj_)
    if (m.first == key) return &m.second;
  return nullptr;
}

const Json& Json::at(std::string_view key) const {
  expect_type(type_, Type::Object);
  const Json* v = find(key);
  ENGINE_CHECK(v != nullptr, "JSON object has no key \"", key, "\"");
  return *v;
}

Json& Json::push_back(Json v) {
  expect_type(type_, Type::Array);
  arr_.push_back(std::move(v));
  return *this;
}

Json& Json::set(std::string key, Json v) {
  expect_type(type_, Type::Object);
  for (Member& m : obj_) {
    if (m.first == key) {
      m.second = std::move(v);
      return *this;
    }
  }
  obj_.emplace_back(std::move(key), std::move(v));
  return *this;
}

bool operator==(const Json& a, const Json& b) {
  if (a.type_ != b.type_) return false;
  switch (a.type_) {
    case Json::Type::Null:
      return true;
    case Json::Type::Bool:
      return a.bool_ == b.bool_;
    case Json::Type::Number:
      if (a.int_ && b.int_) return a.i64_ == b.i64_;
      return a.num_ == b.num_;
    case Json::Type::String:
      return a.str_ == b.str_;
    case Json::Type::Array:
      return a.arr_ == b.arr_;
    case Json::Type::Object:  // keys are unique, so order does not matter
      if (a.obj_.size() != b.obj_.size()) return false;
      for (const Json::Member& m : a.obj_) {
        const Json* other = b.find(m.first);
        if (other == nullptr || !(*other == m.second)) return false;
      }
      return true;
  }
  return false;
}

void json_escape(std::string& out, std::string_view s) {
  append_json_string(out, s);
}

void Json::dump_to(std::string& out, int indent, int depth) const {
  switch (type_) {
    case Type::Null:
      out += "null";
      return;
    case Type::Bool:
      out += bool_ ? "true" : "false";
      return;
    case Type::Number: {
      char buf[64];
      std::to_chars_result r;
      if (int_) {
        r = std::to_chars(buf, buf + sizeof buf, i64_);
      } else if (!std::isfinite(num_)) {
        out += "null";
        return;
      } else if (single_) {
        r = std::to_chars(buf, buf + sizeof buf, static_cast<float>(num_));
      } else {
        r = std::to_chars(buf, buf + sizeof buf, num_);  // shortest text that round-trips
      }
      out.append(buf, r.ptr);
      return;
    }
    case Type::String:
      json_escape(out, str_);
      return;
    case Type::Array:
      out += '[';
      for (size_t i = 0; i < arr_.size(); ++i) {
        if (i > 0) out += ',';
        newline(out, indent, depth + 1);
        arr_[i].dump_to(out, indent, depth + 1);
      }
      if (!arr_.empty()) newline(out, indent, depth);
      out += ']';
      return;
    case Type::Object:
      out += '{';
      for (size_t i = 0; i < obj_.size(); ++i) {
        if (i > 0) out += ',';
        newline(out, indent, depth + 1);
        json_escape(out, obj_[i].first);
        out += indent < 0 ? ":" : ": ";
        obj_[i].second.dump_to(out, indent, depth + 1);
      }
      if (!obj_.empty()) newline(out, indent, depth);
      out += '}';
      return;
  }
}

std::string Json::dump(int indent) const {
  std::string out;
  dump_to(out, indent, 0);
  return out;
}

// Recursive descent over the text; every error names the byte offset where it was found.
class JsonParser {
 public:
  explicit JsonParser(std::string_view s) : s_(s) {}

  Json parse_document() {
    skip_ws();
    Json v = parse_value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 512;

  [[noreturn]] void fail(std::string_view what) const { fail_at(pos_, what); }
  [[noreturn]] void fail_at(size_t at, std::string_view what) const {
    ENGINE_FAIL("JSON parse error at byte ", at, ": ", what);
  }

  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }

  void skip_ws() {
    while (!at_end() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }

  void expect(char c) {
    if (peek() != c || at_end()) fail(std::string("expected '") + c + "'");
    ++pos_;
  }

  void expect_word(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) fail(std::string("expected '") + std::string(w) + "'");
    pos_ += w.size();
  }

  Json parse_value(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than 512");
    if (at_end()) fail("unexpected end of text, expected a value");
    switch (s_[pos_]) {
      case '{':
        return parse_object(depth);
      case '[':
        return parse_array(depth);
      case '"':
        return Json(parse_string());
      case 't':
        expect_word("true");
        return Json(true);
      case 'f':
        expect_word("false");
        return Json(false);
      case 'n':
        expect_word("null");
        return Json();
      default:
        return parse_number();
    }
  }

  Json parse_object(int depth) {
    Json obj = Json::object();
    std::unordered_set<std::string> seen;
    expect('{');
    skip_ws();
    if (peek() == '}') {
      ++pos_;
      return obj;
    }
    for (;;) {
      skip_ws();
      size_t key_at = pos_;
      if (peek() != '"') fail("expected a string key");
      std::string key = parse_string();
      if (!seen.insert(key).second) fail_at(key_at, "duplicate key \"" + key + "\"");
      skip_ws();
      expect(':');
      skip_ws();
      Json v = parse_value(depth + 1);
      obj.obj_.emplace_back(std::move(key), std::move(v));
      skip_ws();
      if (peek() == ',' && !at_end()) {
        ++pos_;
        continue;
      }
      if (peek() == '}' && !at_end()) {
        ++pos_;
        return obj;
      }
      fail("expected ',' or '}' in object");
    }
  }

  Json parse_array(int depth) {
    Json arr = Json::array();
    expect('[');
    skip_ws();
    if (peek() == ']') {
      ++pos_;
      return arr;
    }
    for (;;) {
      skip_ws();
      arr.arr_.push_back(parse_value(depth + 1));
      skip_ws();
      if (peek() == ',' && !at_end()) {
        ++pos_;
        continue;
      }
      if (peek() == ']' && !at_end()) {
        ++pos_;
        return arr;
      }
      fail("expected ',' or ']' in array");
    }
  }

  uint32_t parse_hex4() {
    if (pos_ + 4 > s_.size()) fail("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s_[pos_ + i];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= c - '0';
      else if (c >= 'a' && c <= 'f')
        v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        v |= c - 'A' + 10;
      else
        fail_at(pos_ + i, "bad hex digit in \\u escape");
    }
    pos_ += 4;
    return v;
  }

  // Copies one UTF-8 sequence starting at pos_, rejecting overlong forms, surrogates and
  // code points above U+10FFFF.
  void copy_utf8(std::string& out) {
    auto b0 = static_cast<unsigned char>(s_[pos_]);
    int len = 0;
    uint32_t cp = 0, min = 0;
    if (b0 >= 0xC2 && b0 <= 0xDF)
      len = 2, cp = b0 & 0x1F, min = 0x80;
    else if ((b0 & 0xF0) == 0xE0)
      len = 3, cp = b0 & 0x0F, min = 0x800;
    else if (b0 >= 0xF0 && b0 <= 0xF4)
      len = 4, cp = b0 & 0x07, min = 0x10000;
    else
      fail("invalid UTF-8 byte");
    if (pos_ + len > s_.size()) fail("truncated UTF-8 sequence");
    for (int i = 1; i < len; ++i) {
      auto b = static_cast<unsigned char>(s_[pos_ + i]);
      if ((b & 0xC0) != 0x80) fail("invalid UTF-8 continuation byte");
      cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail("invalid UTF-8 sequence");
    out.append(s_.substr(pos_, len));
    pos_ += len;
  }

  std::string parse_string() {
    expect('"');
    std::string out;
    for (;;) {
      if (at_end()) fail("unterminated string");
      char c = s_[pos_];
      auto u = static_cast<unsigned char>(c);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (u < 0x20) fail("raw control character in string");
      if (u >= 0x80) {
        copy_utf8(out);
        continue;
      }
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      size_t esc_at = pos_++;
      if (at_end()) fail("unterminated escape");
      char e = s_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t cp = parse_hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) fail_at(esc_at, "unpaired low surrogate");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (s_.substr(pos_, 2) != "\\u") fail_at(esc_at, "unpaired high surrogate");
            pos_ += 2;
            uint32_t lo = parse_hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail_at(esc_at, "unpaired high surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default:
          fail_at(esc_at, "bad escape");
      }
    }
  }

  static bool is_digit(char c) { return c >= '0' && c <= '9'; }

  // RFC 8259 grammar: -? (0 | [1-9][0-9]*) (.[0-9]+)? ([eE][+-]?[0-9]+)?
  Json parse_number() {
    size_t start = pos_;
    bool integral = true;
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
    } else if (is_digit(peek())) {
      while (is_digit(peek())) ++pos_;
    } else {
      fail_at(start, "expected a value");
    }
    if (peek() == '.') {
      integral = false;
      ++pos_;
      if (!is_digit(peek())) fail("expected a digit after '.'");
      while (is_digit(peek())) ++pos_;
    }
    if (peek() == 'e' || peek() == 'E') {
      integral = false;
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!is_digit(peek())) fail("expected a digit in the exponent");
      while (is_digit(peek())) ++pos_;
    }
    const char* first = s_.data() + start;
    const char* last = s_.data() + pos_;
    if (integral) {
      int64_t v = 0;
      auto r = std::from_chars(first, last, v);
      if (r.ec == std::errc() && r.ptr == last) return Json(static_cast<long long>(v));
      // Out of int64 range: fall through to a double.
    }
    double d = 0.0;
    auto r = std::from_chars(first, last, d);
    if (r.ec == std::errc::result_out_of_range) {
      // Too small underflows to zero, as in Python; too large is an error.
      if (decimal_magnitude(first, last) >= 0) fail_at(start, "number out of range");
      return Json(*first == '-' ? -0.0 : 0.0);
    }
    if (r.ec != std::errc() || r.ptr != last) fail_at(start, "bad number");
    return Json(d);
  }

  // Rough power of ten of a well-formed number literal; only its sign is used, to tell an
  // overflow (about 1e308) from an underflow (about 1e-324).
  static int64_t decimal_magnitude(const char* p, const char* last) {
    if (*p == '-') ++p;
    int64_t int_digits = 0, frac_zeros = 0;
    bool nonzero = false;
    for (; p < last && is_digit(*p); ++p) {
      if (*p != '0') nonzero = true;
      if (nonzero) ++int_digits;
    }
    if (p < last && *p == '.') {
      for (++p; p < last && is_digit(*p); ++p) {
        if (*p != '0') nonzero = true;
        if (!nonzero) ++frac_zeros;
      }
    }
    int64_t exp = 0;
    if (p < last && (*p == 'e' || *p == 'E')) {
      ++p;
      bool neg = *p == '-';
      if (*p == '+' || *p == '-') ++p;
      for (; p < last && exp < 100000; ++p) exp = exp * 10 + (*p - '0');
      if (neg) exp = -exp;
    }
    return exp + (int_digits > 0 ? int_digits : -frac_zeros);
  }

  std::string_view s_;
  size_t pos_ = 0;
};

Json Json::parse(std::string_view text) {
  return JsonParser(text).parse_document();
}

}  // namespace engine
