// tests/apps/test_flags.cpp: apps/flags.h in-process: --help under one heading per section (or
// "Flags:" without sections), and a retired flag refused with its own message whatever its form.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "apps/flags.h"

namespace engine::apps {
namespace {

// Parses args (after a program name) on f; the UsageError's message, or "" when none.
std::string parse_error(Flags& f, std::vector<std::string> args) {
  args.insert(args.begin(), "prog");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  try {
    f.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

std::string help_of(const Flags& f) {
  ::testing::internal::CaptureStdout();
  f.print_help();
  return ::testing::internal::GetCapturedStdout();
}

TEST(Flags, HelpListsEachSectionUnderItsHeadingInOrder) {
  int64_t a = 1, b = 2;
  std::string c = "x";
  Flags f("usage: prog");
  f.section("First topic");
  f.add("alpha", &a, "the first");
  f.section("Second topic");
  f.add("beta", &b, "the second");
  f.add("gamma", &c, "the third");
  f.retire("old", "--old was removed: set PROG_OLD instead");
  const std::string help = help_of(f);
  EXPECT_EQ(help.find("usage: prog\n\nFirst topic:\n  --alpha "), 0u) << help;
  const size_t second = help.find("\n\nSecond topic:\n  --beta ");
  EXPECT_NE(second, std::string::npos) << help;
  EXPECT_GT(help.find("\n  --gamma "), second) << help;
  EXPECT_EQ(help.find("Flags:"), std::string::npos) << help;
  EXPECT_EQ(help.find("--old"), std::string::npos) << "a retired flag is not listed: " << help;
}

TEST(Flags, WithoutSectionsHelpSaysFlags) {
  int64_t a = 1;
  Flags f("usage: prog");
  f.add("alpha", &a, "the first");
  EXPECT_EQ(help_of(f).find("usage: prog\n\nFlags:\n  --alpha "), 0u) << help_of(f);
}

TEST(Flags, ARetiredFlagIsRefusedWithItsMessageInEveryForm) {
  int64_t a = 1;
  bool s = false;
  Flags f("usage: prog");
  f.add("alpha", &a, "the first");
  f.add_switch("switch", &s, "a switch");
  f.retire("old", "--old was removed: set PROG_OLD instead");
  const std::string want = "--old was removed: set PROG_OLD instead";
  EXPECT_EQ(parse_error(f, {"--old", "3"}), want);
  EXPECT_EQ(parse_error(f, {"--old=3"}), want);
  EXPECT_EQ(parse_error(f, {"--alpha", "2", "--old"}), want) << "even without its value";
  EXPECT_EQ(parse_error(f, {"--alpha", "2", "--switch"}), "");
  EXPECT_EQ(a, 2);
}

}  // namespace
}  // namespace engine::apps
