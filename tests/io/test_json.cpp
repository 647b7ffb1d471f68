// tests/io/test_json.cpp: what our JSON layer (io/json.h) adds to nlohmann-json: errors that name
// the source and the byte, the strict reader's checks (duplicate keys, depth, numbers out of
// range: not infinity), insertion order both ways, and a writer that does not throw on bad UTF-8.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "io/json.h"
#include "tests/common/expect_error.h"

namespace engine {
namespace {

using testing::expect_error;

Json parse(std::string_view text) {
  return parse_json(text, "f.json");
}

TEST(Json, SyntaxErrorsNameTheSourceAndTheByte) {
  expect_error([] { parse("[1, 2,]"); }, {"f.json: not valid JSON: at byte 6"});
  expect_error([] { parse(R"({"a" 1})"); }, {"f.json", "at byte 5"});
  expect_error([] { parse(R"({"w":{"dtype":"F32",)"); }, {"f.json", "at byte 20"});
  expect_error([] { parse(""); }, {"f.json", "at byte 0"});
  expect_error([] { parse("{} x"); }, {"f.json", "at byte 3"});
  expect_error([] { parse("\"a\nb\""); }, {"f.json", "at byte 2"});  // raw control character
  expect_error([] { parse("\"\xFF\""); }, {"f.json", "at byte 1"});  // not UTF-8
  expect_error([] { parse("\"\xED\xA0\x80\""); }, {"f.json"});       // UTF-8 of a surrogate
  expect_error([] { parse("NaN"); }, {"f.json", "at byte 0"});
  // nlohmann's "[json.exception.parse_error.101] " prefix is left out.
  try {
    parse("[1 2]");
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("json.exception"), std::string::npos) << e.what();
  }
}

TEST(Json, DuplicateKeysAreErrorsAtEveryDepth) {
  expect_error([] { parse(R"({"a":1,"a":2})"); }, {"f.json", "duplicate key \"a\""});
  expect_error([] { parse(R"({"o":{"k":1,"j":[],"k":2}})"); }, {"duplicate key \"k\""});
  expect_error([] { parse(R"({"a":{"b":1},"a":2})"); }, {"duplicate key \"a\""});
  expect_error([] { parse(R"([{"x":{"a":1}},{"y":1,"y":2}])"); }, {"duplicate key \"y\""});
  // The same key in different objects is fine, at the same depth or another.
  EXPECT_NO_THROW(parse(R"([{"a":1},{"a":2}])"));
  EXPECT_NO_THROW(parse(R"({"x":{"a":1,"b":{"a":3}},"y":{"a":2},"a":{"x":0}})"));
}

TEST(Json, DeepNestingIsAnErrorNotACrash) {
  expect_error([] { parse(std::string(100000, '[')); }, {"f.json", "nesting deeper than 512"});
  std::string deep_objects;
  for (int i = 0; i < 600; ++i) deep_objects += "{\"k\":";
  expect_error([&] { parse(deep_objects); }, {"nesting deeper than 512"});
  EXPECT_NO_THROW(parse(std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']')));
  expect_error(
      [] { parse(std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']')); },
      {"nesting deeper than 512"});
}

TEST(Json, NumbersOutOfRangeAreErrors) {
  expect_error([] { parse("1e999"); }, {"f.json", "number overflow"});
  expect_error([] { parse("[-1e400]"); }, {"f.json", "number overflow"});
  EXPECT_EQ(parse("1e-400").get<double>(), 0.0);               // underflow to zero, as Python does
  EXPECT_TRUE(parse("9007199254740993").is_number_integer());  // 2^53 + 1 stays exact
  EXPECT_EQ(parse("9007199254740993").get<int64_t>(), 9007199254740993LL);
}

TEST(Json, ObjectsKeepTheirOrderBothWays) {
  Json v = parse(R"({"z": [1, {"k": null}], "a": {}, "m": []})");
  std::vector<std::string> keys;
  for (const auto& [k, _] : v.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"z", "a", "m"}));
  EXPECT_EQ(dump_json(v), R"({"z":[1,{"k":null}],"a":{},"m":[]})");
  Json w = {{"name", "allreduce"}, {"ts", 12}, {"ok", true}};
  w["after"] = 2.5;
  EXPECT_EQ(dump_json(w), R"({"name":"allreduce","ts":12,"ok":true,"after":2.5})");
  EXPECT_EQ(dump_json(Json{{"a", {1}}}, 2), "{\n  \"a\": [\n    1\n  ]\n}");
}

TEST(Json, DumpWritesNullForNonFiniteAndReplacesBadUtf8) {
  EXPECT_EQ(dump_json(Json{std::nan(""), std::numeric_limits<double>::infinity()}), "[null,null]");
  // A name with a stray byte (e.g. from a file name) is written, not thrown on.
  EXPECT_EQ(dump_json(Json("a\xFF"
                           "b")),
            "\"a\xEF\xBF\xBD"
            "b\"");
  const std::string s = std::string("q\"b\\\n\x01\t") + "\xC3\xA9";
  EXPECT_EQ(parse(dump_json(Json(s))).get<std::string>(), s);
}

}  // namespace
}  // namespace engine
