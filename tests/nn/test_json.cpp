// tests/nn/test_json.cpp: the JSON value, parser and writer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "core/error.h"
#include "nn/json.h"

namespace engine {
namespace {

// Runs f, expects engine::Error whose message contains every part.
template <class F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error thrown; expected one containing '" << *parts.begin() << "'";
  } catch (const Error& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message '" << e.what() << "' lacks '" << p << "'";
  }
}

TEST(Json, ParsesScalars) {
  EXPECT_TRUE(Json::parse("null").is_null());
  EXPECT_TRUE(Json::parse(" true ").as_bool());
  EXPECT_FALSE(Json::parse("false").as_bool());
  EXPECT_EQ(Json::parse("0").as_int(), 0);
  EXPECT_EQ(Json::parse("-17").as_int(), -17);
  EXPECT_EQ(Json::parse("9007199254740993").as_int(), 9007199254740993LL);  // 2^53 + 1, exact
  EXPECT_EQ(Json::parse("-9223372036854775808").as_int(), std::numeric_limits<int64_t>::min());
  Json big = Json::parse("18446744073709551616");  // beyond int64: a double
  EXPECT_FALSE(big.is_int());
  EXPECT_DOUBLE_EQ(big.as_double(), 18446744073709551616.0);
  EXPECT_DOUBLE_EQ(Json::parse("2.5").as_double(), 2.5);
  EXPECT_FALSE(Json::parse("2.0").is_int());
  EXPECT_DOUBLE_EQ(Json::parse("-1.25e-3").as_double(), -1.25e-3);
  EXPECT_DOUBLE_EQ(Json::parse("1E+2").as_double(), 100.0);
  EXPECT_EQ(Json::parse("1e-400").as_double(), 0.0);  // underflow to zero, as Python does
  EXPECT_TRUE(std::signbit(Json::parse("-1e-400").as_double()));
  EXPECT_EQ(Json::parse("4.9e-324").as_double(), std::numeric_limits<double>::denorm_min());
}

TEST(Json, ParsesStringEscapesAndUtf8) {
  EXPECT_EQ(Json::parse(R"("a\"b\\c\/d\b\f\n\r\t")").as_string(), "a\"b\\c/d\b\f\n\r\t");
  EXPECT_EQ(Json::parse(R"("\u00e9\u4e2D")").as_string(), "\xC3\xA9\xE4\xB8\xAD");
  EXPECT_EQ(Json::parse(R"("\ud83d\ude00")").as_string(), "\xF0\x9F\x98\x80");  // U+1F600
  EXPECT_EQ(Json::parse("\"caf\xC3\xA9\"").as_string(), "caf\xC3\xA9");
  EXPECT_EQ(Json::parse(R"("\u0000")").as_string(), std::string(1, '\0'));
}

TEST(Json, ParsesNestedAndKeepsOrder) {
  Json v = Json::parse(R"({"z": [1, {"k": null}], "a": {}, "m": []})");
  ASSERT_TRUE(v.is_object());
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v.members()[0].first, "z");
  EXPECT_EQ(v.members()[1].first, "a");
  EXPECT_EQ(v.members()[2].first, "m");
  EXPECT_EQ(v.at("z")[0].as_int(), 1);
  EXPECT_TRUE(v.at("z")[1].at("k").is_null());
  EXPECT_EQ(v.at("a").size(), 0u);
  EXPECT_EQ(v.find("nope"), nullptr);
}

TEST(Json, ErrorsNameTheByteOffset) {
  expect_error([] { Json::parse("[1, 2,]"); }, {"at byte 6", "expected a value"});
  expect_error([] { Json::parse(R"({"a":1,"a":2})"); }, {"at byte 7", "duplicate key \"a\""});
  expect_error([] { Json::parse(R"("abc)"); }, {"at byte 4", "unterminated string"});
  expect_error([] { Json::parse("01"); }, {"at byte 1", "unexpected text"});
  expect_error([] { Json::parse("1."); }, {"at byte 2", "digit"});
  expect_error([] { Json::parse("-"); }, {"at byte 0"});
  expect_error([] { Json::parse(""); }, {"at byte 0", "unexpected end"});
  expect_error([] { Json::parse("{} x"); }, {"at byte 3", "unexpected text"});
  expect_error([] { Json::parse(R"({"a" 1})"); }, {"at byte 5", "expected ':'"});
  expect_error([] { Json::parse(R"({"a":1 "b":2})"); }, {"at byte 7", "expected ',' or '}'"});
  expect_error([] { Json::parse("[1 2]"); }, {"at byte 3", "expected ',' or ']'"});
  expect_error([] { Json::parse("{1:2}"); }, {"at byte 1", "string key"});
  expect_error([] { Json::parse("tru"); }, {"at byte 0", "'true'"});
  expect_error([] { Json::parse("1e999"); }, {"at byte 0", "out of range"});
  expect_error([] { Json::parse("NaN"); }, {"at byte 0"});
  expect_error([] { Json::parse("\"a\nb\""); }, {"at byte 2", "control character"});
  expect_error([] { Json::parse(R"("\x")"); }, {"at byte 1", "bad escape"});
  expect_error([] { Json::parse(R"("\u12G4")"); }, {"at byte 5", "hex digit"});
  expect_error([] { Json::parse(R"("\ud83d")"); }, {"at byte 1", "unpaired high surrogate"});
  expect_error([] { Json::parse(R"("\ude00")"); }, {"at byte 1", "unpaired low surrogate"});
  expect_error([] { Json::parse("\"\xFF\""); }, {"at byte 1", "UTF-8"});
  expect_error([] { Json::parse("\"\xC0\xAF\""); }, {"at byte 1", "UTF-8"});      // overlong '/'
  expect_error([] { Json::parse("\"\xED\xA0\x80\""); }, {"at byte 1", "UTF-8"});  // surrogate
  expect_error([] { Json::parse("\"\xE4\xB8\""); }, {"at byte 1", "UTF-8"});      // truncated
}

TEST(Json, DeepNestingIsAnErrorNotACrash) {
  std::string deep(100000, '[');
  expect_error([&] { Json::parse(deep); }, {"nesting deeper than 512"});
  std::string ok = std::string(500, '[') + std::string(500, ']');
  EXPECT_NO_THROW(Json::parse(ok));
}

TEST(Json, DumpsCompactAndPretty) {
  Json v = Json::object()
               .set("name", "allreduce")
               .set("ts", 12)
               .set("ok", true)
               .set("none", nullptr)
               .set("xs", Json::array().push_back(1).push_back(2.5).push_back("s"))
               .set("empty", Json::object());
  EXPECT_EQ(v.dump(),
            R"({"name":"allreduce","ts":12,"ok":true,"none":null,"xs":[1,2.5,"s"],"empty":{}})");
  EXPECT_EQ(Json::object().set("a", Json::array().push_back(1)).set("b", Json::array()).dump(2),
            "{\n  \"a\": [\n    1\n  ],\n  \"b\": []\n}");
  EXPECT_EQ(Json::parse(v.dump(2)), v);
}

TEST(Json, EscapesStringsOnDump) {
  std::string s = std::string("q\"b\\n\n\x01\x1f\t/") + "\xC3\xA9";
  Json j(s);
  EXPECT_EQ(j.dump(), "\"q\\\"b\\\\n\\n\\u0001\\u001f\\t/\xC3\xA9\"");
  EXPECT_EQ(Json::parse(j.dump()).as_string(), s);
}

TEST(Json, SetReplacesAndKeepsPosition) {
  Json o = Json::object().set("a", 1).set("b", 2).set("a", 3);
  ASSERT_EQ(o.size(), 2u);
  EXPECT_EQ(o.members()[0].first, "a");
  EXPECT_EQ(o.at("a").as_int(), 3);
}

TEST(Json, FloatsAndDoublesRoundTrip) {
  EXPECT_EQ(Json(0.1f).dump(), "0.1");
  EXPECT_EQ(Json(0.1).dump(), "0.1");
  EXPECT_EQ(Json(1e-7f).dump(), "1e-07");
  EXPECT_EQ(Json(-0.0).dump(), "-0");
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof d);
    float f;
    uint32_t fbits = static_cast<uint32_t>(bits >> 32);
    std::memcpy(&f, &fbits, sizeof f);
    if (std::isfinite(d)) {
      double back = Json::parse(Json(d).dump()).as_double();
      ASSERT_EQ(std::memcmp(&back, &d, sizeof d), 0) << Json(d).dump();
    }
    if (std::isfinite(f)) {
      float back = static_cast<float>(Json::parse(Json(f).dump()).as_double());
      ASSERT_EQ(std::memcmp(&back, &f, sizeof f), 0) << Json(f).dump();
    }
  }
}

TEST(Json, NonFiniteNumbersDumpAsNull) {
  EXPECT_EQ(Json(std::nan("")).dump(), "null");
  EXPECT_EQ(Json(std::numeric_limits<float>::infinity()).dump(), "null");
}

TEST(Json, IntegersKeepExactValues) {
  EXPECT_EQ(Json(int64_t{9007199254740993}).dump(), "9007199254740993");
  EXPECT_EQ(Json(std::numeric_limits<int64_t>::min()).dump(), "-9223372036854775808");
  EXPECT_EQ(Json(size_t{42}).dump(), "42");
  EXPECT_EQ(Json(uint64_t{1} << 63 >> 1).as_int(), int64_t{1} << 62);
  expect_error([] { Json(std::numeric_limits<uint64_t>::max()); }, {"above the int64 range"});
  EXPECT_EQ(Json::array_of(std::vector<int64_t>{3, 0, 5}).dump(), "[3,0,5]");
}

TEST(Json, AccessorsCheckTypes) {
  expect_error([] { Json::parse("1.5").as_int(); }, {"not an integer"});
  expect_error([] { Json("s").as_double(); }, {"string", "number"});
  expect_error([] { Json(1).as_string(); }, {"number", "string"});
  expect_error([] { Json::parse("{}").at("missing"); }, {"no key \"missing\""});
  expect_error([] { Json::parse("[1]")[1]; }, {"index 1 out of range"});
  expect_error([] { Json(1).size(); }, {"no size"});
  expect_error([] { Json::array().set("k", 1); }, {"is an array, expected an object"});
  expect_error([] { Json::object().push_back(1); }, {"is an object, expected an array"});
}

TEST(Json, EqualityIgnoresObjectOrder) {
  EXPECT_EQ(Json::parse(R"({"a":1,"b":[2]})"), Json::parse(R"({"b":[2],"a":1})"));
  EXPECT_FALSE(Json::parse(R"({"a":1})") == Json::parse(R"({"a":2})"));
  EXPECT_FALSE(Json::parse("[1,2]") == Json::parse("[2,1]"));
  EXPECT_FALSE(Json::parse("1") == Json::parse("\"1\""));
  EXPECT_EQ(Json::parse("2"), Json::parse("2.0"));
}

}  // namespace
}  // namespace engine
