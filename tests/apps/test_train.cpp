// tests/apps/test_train.cpp: the `train` program end to end on a small generated dataset:
// flags, errors, a falling loss, metrics, checkpoints and resume, and data parallelism.
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "core/device.h"
#include "io/json.h"
#include "tests/apps/train_fixture.h"

using namespace engine;
using namespace engine::testing;

namespace {

// A flag as `train --help` lists it: its name, help text, the default shown ("" when none) and,
// for a flag with a fixed set of values, those values.
struct HelpFlag {
  std::string name, text, def;
  std::vector<std::string> choices;
};

std::vector<HelpFlag> help_flags(const std::string& help) {
  static const std::regex line_re(R"(^  --([a-z0-9-]+) +(.*?)(?: \[default: (.*)\])?$)");
  static const std::regex choices_re(R"(\(([a-z0-9-]+(?:\|[a-z0-9-]+)+)\)$)");
  std::vector<HelpFlag> out;
  std::istringstream in(help);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m, c;
    if (!std::regex_match(line, m, line_re) || m[1] == "help") continue;
    HelpFlag f{m[1], m[2], m[3], {}};
    if (std::regex_search(f.text, c, choices_re)) {
      std::istringstream items(c[1].str());
      for (std::string v; std::getline(items, v, '|');) f.choices.push_back(v);
    }
    out.push_back(f);
  }
  return out;
}

// The table of train's flags in docs/training.md: the rows between "| flag | meaning |" and a
// blank line.
std::string readme_flag_table() {
  fs::path src = __FILE__;  // relative when ccache rewrote it: then to the tests' build folder
  if (src.is_relative()) src = fs::path(kBuild) / "tests" / src;
  std::ifstream in(src.parent_path() / "../../docs/training.md");
  std::stringstream text;
  text << in.rdbuf();
  const std::string readme = text.str();
  const size_t begin = readme.find("| flag | meaning |");
  EXPECT_NE(begin, std::string::npos) << "docs/training.md has no flag table";
  if (begin == std::string::npos) return "";
  return readme.substr(begin, readme.find("\n\n", begin) - begin);
}

bool is_number(const std::string& s) {
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return !s.empty() && *end == 0;
}

}  // namespace

// Every flag that --help lists is documented (help text and a row of docs/training.md's table,
// which lists no other flag) and parsed: its default or each of its values is accepted, a bad
// value is an error naming it; a switch takes no value. `--FLAG=VALUE --help` parses up to --help
// and exits 0 without training.
TEST_F(TrainTest, EveryFlagOfHelpIsDocumentedAndParsed) {
  RunResult r = run(kTrain + " --help");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::vector<HelpFlag> flags = help_flags(r.output);
  ASSERT_GE(flags.size(), 30u) << r.output;
  const std::string table = readme_flag_table();
  std::set<std::string> listed;
  for (const HelpFlag& f : flags) {
    SCOPED_TRACE("--" + f.name);
    listed.insert(f.name);
    EXPECT_FALSE(f.text.empty());
    EXPECT_TRUE(std::regex_search(table, std::regex("(^|[^a-z-])--" + f.name + "([^a-z-]|$)")))
        << "not in docs/training.md";
    RunResult bare = run(kTrain + " --" + f.name + "=x --help");
    if (bare.code != 0 && bare.output.find("takes no value") != std::string::npos) {  // a switch
      EXPECT_NE(bare.output.find("--" + f.name), std::string::npos) << bare.output;
      EXPECT_EQ(run(kTrain + " --" + f.name + " --help").code, 0);
      continue;
    }
    std::vector<std::string> good = f.choices;
    if (good.empty()) good.push_back(f.def.empty() ? "x" : f.def);
    for (const std::string& v : good) {
      RunResult ok = run(kTrain + " --" + f.name + "=" + v + " --help");
      EXPECT_EQ(ok.code, 0) << v << "\n" << ok.output;
    }
    if (f.choices.empty() && !is_number(f.def)) continue;  // any text is a value
    RunResult bad = run(kTrain + " --" + f.name + "=bogus --help");
    EXPECT_NE(bad.code, 0) << bad.output;
    EXPECT_NE(bad.output.find("--" + f.name), std::string::npos) << bad.output;
  }
  std::smatch m;
  for (std::string rest = table; std::regex_search(rest, m, std::regex("--([a-z][a-z0-9-]*)"));
       rest = m.suffix())
    EXPECT_TRUE(listed.count(m[1]))
        << "docs/training.md documents --" << m[1] << ", --help does not list it";
  RunResult unknown = run(kTrain + " --no-such-flag=1 --help");
  EXPECT_NE(unknown.code, 0);
  EXPECT_NE(unknown.output.find("--no-such-flag"), std::string::npos) << unknown.output;
}

TEST_F(TrainTest, BadInputGivesAClearError) {
  RunResult r = run(kTrain + " --model resnet");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("resnet"), std::string::npos) << r.output;
  r = run(kTrain + " --epochs two");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("--epochs"), std::string::npos) << r.output;
  r = run(kTrain + " --data-dir " + path("nowhere"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("nowhere"), std::string::npos) << r.output;
  r = run(kTrain + " --data-dir " + data_ + " --batch-size 100 --world-size 1 --init-from " +
          path("missing.safetensors"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("missing.safetensors"), std::string::npos) << r.output;
}

TEST_F(TrainTest, LossFallsAndMetricsAreWritten) {
  RunResult r = run(kTrain + " --model linear --threads 1 --epochs 3 --lr 0.05 --data-dir " +
                    data_ + " --metrics " + path("m.jsonl"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("Rank 0, epoch 0: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("accuracy"), std::string::npos) << r.output;
  std::ifstream in(path("m.jsonl"));
  std::string line;
  std::vector<Json> rows;
  while (std::getline(in, line)) rows.push_back(parse_json(line, path("m.jsonl")));
  ASSERT_EQ(rows.size(), 3u);
  std::vector<std::string> keys;  // in docs/training.md's order
  for (const auto& [k, v] : rows[0].items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"epoch",
                                            "step",
                                            "train_loss",
                                            "test_loss",
                                            "test_acc",
                                            "images_per_s",
                                            "wall_s",
                                            "train_flop_per_image",
                                            "precision",
                                            "optimizer_state_bytes",
                                            "comm_bytes_per_step",
                                            "skipped_steps",
                                            "world_size",
                                            "generation",
                                            "world_size_changes",
                                            "steps_lost",
                                            "straggler_rank",
                                            "straggler_share",
                                            "straggler_late_ms",
                                            "wait_ms_per_step"}));
  // One rank, SGD with momentum 0.5 on linear (7850 parameters): one momentum buffer, no sync.
  EXPECT_EQ(rows[0].at("optimizer_state_bytes").get<int64_t>(), 7850 * 4);
  EXPECT_EQ(rows[0].at("comm_bytes_per_step").get<double>(), 0.0);
  // linear 784 -> 10: forward 2 x 7840 FLOP, its input needs no gradient: weight gradient only.
  EXPECT_EQ(rows[0].at("train_flop_per_image").get<double>(), 2 * 2 * 7840.0);
  EXPECT_EQ(rows[2].at("step").get<int64_t>(), 12);  // 512 / 128 = 4 steps per epoch
  EXPECT_LT(rows[2].at("train_loss").get<double>(), 0.5 * rows[0].at("train_loss").get<double>());
  EXPECT_GT(rows[2].at("test_acc").get<double>(), 0.9);
}

namespace {

// The pieces of text a terminal shows as lines: output cut at '\r' and '\n', empty ones dropped.
std::vector<std::string> screen_lines(const std::string& out) {
  std::vector<std::string> lines;
  std::string cur;
  for (char c : out) {
    if (c != '\r' && c != '\n') {
      cur += c;
      continue;
    }
    if (!cur.empty()) lines.push_back(cur);
    cur.clear();
  }
  if (!cur.empty()) lines.push_back(cur);
  return lines;
}

}  // namespace

// Issue 21: on a terminal the bar fits the width (60 columns here: the pseudo-terminal of `script`
// has no size, so COLUMNS says it) and counts to where the run ends under --steps and --resume,
// not to the epoch's 32 batches; the plain lines of a pipe count the same.
TEST_F(TrainTest, ProgressFitsTheTerminalAndCountsToTheRunsEnd) {
  if (run("command -v script").code != 0) GTEST_SKIP() << "script (util-linux) is missing";
  const std::string common = kTrain + " --model linear --threads 1 --batch-size 16 --data-dir " +
                             data_ + " --checkpoint " + path("ck.safetensors");
  auto on_terminal = [&](const std::string& args) {
    return run("script -qec 'COLUMNS=60 " + common + " " + args + "' /dev/null < /dev/null");
  };
  const RunResult first = on_terminal("--steps 10");
  ASSERT_EQ(first.code, 0) << first.output;
  const RunResult resumed = on_terminal("--steps 20 --resume " + path("ck.safetensors"));
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  for (const RunResult* r : {&first, &resumed}) {
    int bars = 0;
    for (const std::string& l : screen_lines(r->output)) {
      if (l.find('[') == std::string::npos) continue;
      ++bars;
      EXPECT_LE(l.size(), 59u) << "'" << l << "'";
      EXPECT_EQ(l.find("/32"), std::string::npos) << "'" << l << "'";
    }
    EXPECT_GE(bars, 1) << r->output;
    EXPECT_EQ(r->output.find("\n\r\n"), std::string::npos) << "an empty line:\n" << r->output;
  }
  EXPECT_NE(first.output.find("10/10 "), std::string::npos) << first.output;
  EXPECT_NE(resumed.output.find("20/20 "), std::string::npos) << resumed.output;
  const RunResult plain = run(common + " --steps 20");
  ASSERT_EQ(plain.code, 0) << plain.output;
  EXPECT_NE(plain.output.find("Rank 0, epoch 0, batch 20/20: loss "), std::string::npos)
      << plain.output;
  EXPECT_EQ(plain.output.find('\r'), std::string::npos) << plain.output;
}

TEST_F(TrainTest, ResumeEqualsAnUninterruptedRunBitForBit) {
  // simplecnn with dropout on, so the RNG state must be restored too; the break falls mid-epoch.
  std::string common =
      kTrain + " --model simplecnn --threads 2 --epochs 2 --batch-size 64 " + "--data-dir " + data_;
  expect_resume_bit_for_bit(common, dir_);
}

TEST_F(TrainTest, InitFromAndSaveRoundTrip) {
  RunResult a = run(kTrain + " --model net --steps 2 --data-dir " + data_ + " --save " +
                    path("a.safetensors"));
  ASSERT_EQ(a.code, 0) << a.output;
  RunResult b =
      run(kTrain + " --model net --steps 1 --lr 1e-9 --momentum 0 --dropout 0 " + "--data-dir " +
          data_ + " --init-from " + path("a.safetensors") + " --save " + path("b.safetensors"));
  ASSERT_EQ(b.code, 0) << b.output;
  std::vector<float> wa = floats(load_safetensors(path("a.safetensors")), "fc2.bias");
  std::vector<float> wb = floats(load_safetensors(path("b.safetensors")), "fc2.bias");
  ASSERT_EQ(wa.size(), wb.size());
  for (size_t i = 0; i < wa.size(); ++i) EXPECT_NEAR(wa[i], wb[i], 1e-6);
  RunResult bad =
      run(kTrain + " --model linear --data-dir " + data_ + " --init-from " + path("a.safetensors"));
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.output.find("weight"), std::string::npos) << bad.output;
}

TEST_F(TrainTest, DeviceFlagFallsBackToCpuWithANoticeOrTrainsOnCuda) {
  RunResult a = run(kTrain + " --model linear --steps 2 --data-dir " + data_);
  ASSERT_EQ(a.code, 0) << a.output;
  RunResult c = run(kTrain + " --model linear --steps 2 --device cuda --data-dir " + data_);
  if (cuda_device_count() == 0) {
    EXPECT_NE(a.output.find("no CUDA device"), std::string::npos) << a.output;
    EXPECT_NE(a.output.find("training on cpu"), std::string::npos) << a.output;
    EXPECT_NE(c.code, 0);
    EXPECT_NE(c.output.find("--device cuda: no CUDA device"), std::string::npos) << c.output;
  } else {
    EXPECT_EQ(c.code, 0) << c.output;
  }
}
