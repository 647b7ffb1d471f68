// tests/apps/test_flight_report.cpp: `flight_report DIR` on dumps made by hand: the verdict on the
// first line and exit 0 for a cause, 1 when the dumps show none, 2 with one line naming the file
// or flag for bad input; --svg draws a well-formed timeline; the example of docs/flight_recorder.md
// prints what that page shows.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/flight_dumps.h"
#include "tests/common/temp_dir.h"
#include "tests/common/xml_check.h"

using namespace engine;
using namespace engine::testing;

namespace {

struct Outcome {
  int code = -1;
  std::string out, err;
  std::string first_line() const { return out.substr(0, out.find('\n')); }
};

class FlightReportProgram : public ::testing::Test {
 protected:
  // Runs build/apps/flight_report ARGS with stdout and stderr captured apart.
  Outcome report(const std::string& args) const {
    const std::string cmd = std::string(ENGINE_BUILD_DIR) + "/apps/flight_report " + args + " > " +
                            tmp_.file("out") + " 2> " + tmp_.file("err") + " < /dev/null";
    Outcome r;
    const int st = std::system(cmd.c_str());
    r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    r.out = read_text(tmp_.file("out"));
    r.err = read_text(tmp_.file("err"));
    return r;
  }
  // A folder of dumps: ranks 0..world-1 completing #1..#n, #i from i * 0.1 s for 5 ms, rank
  // late_of(i) arriving last (inside 1 ms; -1: none).
  template <class F>
  std::string dumps(const std::string& name, int world, int64_t n, F late_of,
                    std::vector<FlightDumpBuilder>* out = nullptr) const {
    const std::string dir = tmp_.file(name);
    std::filesystem::create_directories(dir);
    std::vector<FlightDumpBuilder> b;
    for (int r = 0; r < world; ++r) b.emplace_back(r, world);
    for (int64_t i = 1; i <= n; ++i)
      for (int r = 0; r < world; ++r)
        b[r].completed(i, i * 0.1 + (r == late_of(i) ? 0.004 : 0), i * 0.1 + 0.005);
    if (out) *out = b;
    for (const FlightDumpBuilder& d : b) d.write(dir);
    return dir;
  }
  TempDir tmp_;
};

void expect_one_line_naming(const Outcome& r, const std::string& what) {
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("flight_report: ", 0), 0u) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line:\n" << r.err;
  EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
}

}  // namespace

TEST_F(FlightReportProgram, NamesTheFrozenRankFirstAndExitsZero) {
  std::vector<FlightDumpBuilder> b;
  const std::string dir = dumps(
      "frozen", 3, 41, [](int64_t) { return -1; }, &b);
  b[0].failed(42, 4.2, "rank 1 is frozen", {1}).written("rank 1 is frozen", 34.2);
  b[2].failed(42, 4.2, "rank 1 is frozen", {1}).written("rank 1 is frozen", 34.2);
  b[0].write(dir);
  b[2].write(dir);
  const Outcome r = report(dir);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.first_line(),
            "rank 1 never entered #42 all_reduce(count=421642, F32, SUM), which ranks 0, 2 waited "
            "in for up to 30.0 s; its last completed collective is #41 all_reduce(count=421642, "
            "F32, SUM)");
  EXPECT_NE(r.out.find("\nstopped in #42 all_reduce(count=421642, F32, SUM) (failed)\n"),
            std::string::npos)
      << r.out;
}

TEST_F(FlightReportProgram, NamesTheStragglerAndExitsOneForAnEvenRun) {
  const Outcome slow = report(dumps("slow", 3, 100, [](int64_t i) { return i <= 90 ? 2 : 0; }));
  EXPECT_EQ(slow.code, 0) << slow.out << slow.err;
  EXPECT_EQ(slow.first_line().rfind("rank 2 is the straggler: it arrived last in 90 of the last "
                                    "100 collectives (90%",
                                    0),
            0u)
      << slow.out;
  const std::string even = dumps("even", 3, 100, [](int64_t i) { return int(i % 3); });
  const Outcome r = report(even);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.first_line().rfind("no cause found", 0), 0u) << r.out;
  // --last 5: #96..#100 alone.
  EXPECT_NE(report("--last 5 " + even)
                .out.find("last 5 collectives every member completed "
                          "(#96..#100)"),
            std::string::npos);
}

TEST_F(FlightReportProgram, BadInputExitsTwoWithOneLineNamingTheFileOrFlag) {
  expect_one_line_naming(report(tmp_.file("nope")), tmp_.file("nope"));
  const std::string dir = dumps("bad", 2, 3, [](int64_t) { return -1; });
  const std::string r1 = dir + "/rank1.json", text = read_text(r1);
  std::ofstream(r1) << text.substr(0, text.size() / 2);
  expect_one_line_naming(report(dir), r1 + ": not valid JSON");
  std::ofstream(r1) << "{\"format\": \"engine-flight-record\", \"version\": 7}";
  expect_one_line_naming(report(dir), r1 + ": \"version\" is 7");

  const Outcome flag = report("--last x " + dir);
  expect_one_line_naming(flag, "--last");
  EXPECT_NE(flag.err.find("flight_report --help"), std::string::npos);
  expect_one_line_naming(report(dir + " --last 5"), "flags go before DIR");
  expect_one_line_naming(report(""), "DIR");
}

TEST_F(FlightReportProgram, DrawsEveryRankOnOneTimeline) {
  std::vector<FlightDumpBuilder> b;
  const std::string dir = dumps(
      "svg", 3, 30, [](int64_t) { return -1; }, &b);
  b[0].started(31, 3.1).write(dir);
  b[1].failed(31, 3.1, "a <bad> & failed", {}).write(dir);
  std::filesystem::remove(dir + "/rank2.json");  // drawn as a row without a dump
  const std::string svg = tmp_.file("t.svg");
  const Outcome r = report("--svg " + svg + " --svg-last 10 " + dir);
  EXPECT_EQ(r.code, 0) << r.out << r.err;  // rank 2 wrote no dump while the others waited
  EXPECT_NE(r.out.find("wrote " + svg), std::string::npos) << r.out;
  const std::string page = read_text(svg);
  const XmlCheck x = check_xml(page);
  EXPECT_TRUE(x.ok) << x.error;
  EXPECT_EQ(x.root, "svg");
  EXPECT_EQ(x.counts.at("rect"), 4 + 10 + 10);  // the legend's 4, 10 boxes for each dumped rank
  for (const char* s : {">rank 0<", ">rank 1<", ">rank 2<", ">no dump<", "#31 all_reduce",
                        "in flight at its dump", "failed: a &lt;bad&gt; &amp; failed"})
    EXPECT_NE(page.find(s), std::string::npos) << s;
}

TEST_F(FlightReportProgram, TheDocsExamplePrintsWhatTheDocsShow) {
  const std::string example = std::string(ENGINE_SOURCE_DIR) + "/docs/flight_report_example";
  const Outcome r = report(example);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const std::string page = read_text(std::string(ENGINE_SOURCE_DIR) + "/docs/flight_recorder.md");
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    EXPECT_NE(page.find(line + "\n"), std::string::npos)
        << "docs/flight_recorder.md lacks the line\n"
        << line;
}
