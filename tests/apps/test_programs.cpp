// tests/apps/test_programs.cpp: every program keeps apps/program.h's conventions: -h and --help
// print usage on stdout and exit 0; an unknown flag or a bad value exits 2 with exactly one line
// on stderr, "<program>: <message>", and nothing on stdout.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include "tests/common/temp_dir.h"

namespace {

struct Outcome {
  int code = -1;
  std::string out, err;
};

// Runs build/apps/<program> <args> with stdout and stderr captured apart.
Outcome run_program(const std::string& program, const std::string& args) {
  const engine::testing::TempDir dir;
  const std::string cmd = std::string(ENGINE_BUILD_DIR) + "/apps/" + program + " " + args + " > " +
                          dir.file("out") + " 2> " + dir.file("err") + " < /dev/null";
  Outcome r;
  const int st = std::system(cmd.c_str());
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = engine::testing::read_text(dir.file("out"));
  r.err = engine::testing::read_text(dir.file("err"));
  return r;
}

struct Program {
  const char* name;
  const char* bad_value;  // a known flag with a value it rejects
};

const Program kPrograms[] = {
    {"train", "--epochs x"},          {"launch", "--nproc-per-node x -- true"},
    {"ring_demo", "--count x"},       {"trace_svg", "--in a.json --out a.svg --width x"},
    {"gpu_selftest", "--device tpu"}, {"allreduce_bench", "--iters x"},
    {"bench_kernels", "--threads x"}, {"flight_report", "--last x"},
};

class Programs : public ::testing::TestWithParam<Program> {};

TEST_P(Programs, HelpPrintsUsageOnStdoutAndExitsZero) {
  const std::string name = GetParam().name;
  const Outcome h = run_program(name, "-h"), help = run_program(name, "--help");
  for (const Outcome* r : {&h, &help}) {
    EXPECT_EQ(r->code, 0) << name << "\n" << r->err;
    EXPECT_EQ(r->err, "") << name;
    EXPECT_NE(r->out.find(name), std::string::npos) << r->out;
    // "Flags:", or a topic's heading ("Data and model:") where a program groups its flags.
    EXPECT_NE(r->out.find(":\n  --"), std::string::npos) << r->out;
  }
  EXPECT_EQ(h.out, help.out);
}

TEST_P(Programs, UsageErrorsExitTwoWithOneLineOnStderr) {
  const std::string name = GetParam().name;
  for (const std::string& args : {std::string("--no-such-flag"), std::string(GetParam().bad_value),
                                  std::string("--no-such-flag=1 extra")}) {
    SCOPED_TRACE(name + " " + args);
    const Outcome r = run_program(name, args);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(r.out, "");
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line:\n" << r.err;
    EXPECT_EQ(r.err.rfind(name + ": ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(name + " --help"), std::string::npos) << r.err;
  }
  const Outcome unknown = run_program(name, "--no-such-flag");
  EXPECT_NE(unknown.err.find("--no-such-flag"), std::string::npos) << unknown.err;
}

INSTANTIATE_TEST_SUITE_P(Every, Programs, ::testing::ValuesIn(kPrograms),
                         [](const ::testing::TestParamInfo<Program>& p) {
                           return std::string(p.param.name);
                         });

}  // namespace
