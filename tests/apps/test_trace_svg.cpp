// tests/apps/test_trace_svg.cpp: `trace_svg` draws a real 2-rank training trace as well-formed
// SVG with a lane per rank and thread, reports allreduce/backward overlap exactly on a trace made
// by hand, and fails with a message naming the file for missing, broken or empty input.
#include <string>
#include <vector>

#include "io/atomic_file.h"
#include "tests/apps/train_fixture.h"
#include "tests/common/xml_check.h"

using namespace engine;
using namespace engine::testing;

namespace {

const std::string kTraceSvg = kBuild + "/apps/trace_svg";

// "" when svg is well-formed XML (libxml2), else what is wrong.
std::string xml_error(const std::string& svg) {
  const XmlCheck x = check_xml(svg);
  return x.ok ? "" : x.error.empty() ? "not well-formed" : x.error;
}

}  // namespace

TEST_F(TrainTest, TraceSvgDrawsEveryRankAndCommThreadOfARealRun) {
  RunResult r = run(kLaunchBin + " --nproc-per-node 2 --master-port " + std::to_string(port()) +
                    " -- " + kTrain +
                    " --model simplecnn --bucket-mb 0.5 --steps 6 --epochs 2 --timeout 60 "
                    "--data-dir " +
                    data_ + " --trace " + path("t.json"));
  ASSERT_EQ(r.code, 0) << r.output;
  RunResult d = run(kTraceSvg + " --in " + path("t.json") + " --out " + path("t.svg") +
                    " --steps 2:3 --title 'steps <2> & 3'");
  ASSERT_EQ(d.code, 0) << d.output << "\n(is the trace_svg target built?)";
  EXPECT_NE(d.output.find("rank 0: "), std::string::npos) << d.output;
  EXPECT_NE(d.output.find("rank 1: "), std::string::npos) << d.output;
  const std::string svg = read_file(path("t.svg"));
  EXPECT_EQ(xml_error(svg), "");
  EXPECT_EQ(svg.find("<svg"), svg.find('<', svg.find("?>")));
  for (const char* lane : {">rank 0 main<", ">rank 0 comm<", ">rank 1 main<", ">rank 1 comm<"})
    EXPECT_NE(svg.find(lane), std::string::npos) << lane;
  EXPECT_NE(svg.find("steps &lt;2&gt; &amp; 3"), std::string::npos) << "title escaped";
  EXPECT_NE(svg.find("<title>allreduce (comm)"), std::string::npos);
  EXPECT_NE(svg.find("Conv2dBackward"), std::string::npos);
  EXPECT_NE(svg.find(">step 2<"), std::string::npos);

  // The whole trace draws too; a window past the last step is an error that says how many.
  EXPECT_EQ(
      run(kTraceSvg + " --in " + path("t.json") + " --out " + path("all.svg") + " --steps all")
          .code,
      0);
  EXPECT_EQ(xml_error(read_file(path("all.svg"))), "");
  RunResult far =
      run(kTraceSvg + " --in " + path("t.json") + " --out " + path("x.svg") + " --steps 5:9");
  EXPECT_NE(far.code, 0);
  EXPECT_NE(far.output.find(path("t.json")), std::string::npos) << far.output;
  EXPECT_NE(far.output.find("6 steps"), std::string::npos) << far.output;
}

TEST_F(TrainTest, TraceSvgMeasuresOverlapOnAHandMadeTrace) {
  // Rank 0: backward 0..20 ms on main; bucket allreduces 10..30 and 25..35 ms on comm:
  // busy 25 ms (the union), 10 ms of it during backward.
  const std::string events =
      R"({"traceEvents":[
{"name":"thread_name","ph":"M","pid":0,"tid":1,"args":{"name":"main"}},
{"name":"thread_name","ph":"M","pid":0,"tid":2,"args":{"name":"comm"}},
{"name":"step","cat":"step","ph":"X","pid":0,"tid":1,"ts":0,"dur":40000},
{"name":"backward","cat":"backward","ph":"X","pid":0,"tid":1,"ts":0,"dur":20000},
{"name":"Conv2dBackward","cat":"backward","ph":"X","pid":0,"tid":1,"ts":1000,"dur":5000},
{"name":"allreduce wait","cat":"comm","ph":"X","pid":0,"tid":1,"ts":20000,"dur":15000},
{"name":"allreduce","cat":"comm","ph":"X","pid":0,"tid":2,"ts":10000,"dur":20000,
 "args":{"bucket":0,"bytes":2097152}},
{"name":"allreduce","cat":"comm","ph":"X","pid":0,"tid":2,"ts":25000,"dur":10000,
 "args":{"bucket":1,"bytes":100}}]})";
  write_file_atomic(path("h.json"), events);
  RunResult d =
      run(kTraceSvg + " --in " + path("h.json") + " --out " + path("h.svg") + " --steps 0:0");
  ASSERT_EQ(d.code, 0) << d.output;
  EXPECT_NE(d.output.find("rank 0: 2 allreduces busy 25.00 ms, 10.00 ms of it (40%) during "
                          "backward; main thread waited 15.00 ms"),
            std::string::npos)
      << d.output;
  const std::string svg = read_file(path("h.svg"));
  EXPECT_EQ(xml_error(svg), "");
  EXPECT_NE(svg.find(">allreduce bucket 0, 2.00 MiB<"), std::string::npos)
      << "labels fit in wide boxes";
  EXPECT_NE(svg.find(">Conv2dBackward<"), std::string::npos);
}

TEST_F(TrainTest, TraceSvgErrorsNameTheFileAndTheProblem) {
  auto fails_with = [&](const std::string& args, const std::vector<std::string>& words) {
    RunResult r = run(kTraceSvg + " " + args);
    EXPECT_NE(r.code, 0) << args << "\n" << r.output;
    for (const std::string& w : words) EXPECT_NE(r.output.find(w), std::string::npos) << r.output;
  };
  fails_with("--in " + path("missing.json") + " --out " + path("m.svg"), {path("missing.json")});
  write_file_atomic(path("bad.json"), "{\"traceEvents\": [ {\"ph\": ");
  fails_with("--in " + path("bad.json") + " --out " + path("b.svg"),
             {path("bad.json"), "not valid JSON"});
  write_file_atomic(path("none.json"), "{\"traceEvents\": []}");
  fails_with("--in " + path("none.json") + " --out " + path("n.svg"),
             {path("none.json"), "no complete"});
  write_file_atomic(path("nosteps.json"),
                    R"({"traceEvents":[{"name":"x","ph":"X","pid":0,"tid":1,"ts":0,"dur":1}]})");
  fails_with("--in " + path("nosteps.json") + " --out " + path("s.svg"),
             {path("nosteps.json"), "no \"step\" events"});
  fails_with("--in " + path("nosteps.json") + " --out " + path("s.svg") + " --steps 3:1",
             {"--steps"});
  fails_with("--out " + path("s.svg"), {"--in"});
  EXPECT_FALSE(fs::exists(path("m.svg")) || fs::exists(path("b.svg")) || fs::exists(path("n.svg")));
}
