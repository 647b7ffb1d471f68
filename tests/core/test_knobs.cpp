// tests/core/test_knobs.cpp: the ENGINE_* variables (core/knobs.h): defaults when unset, the
// values they take, one error naming the variable otherwise, and docs/knobs.md's table naming
// exactly the variables the reader knows.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <set>
#include <string>

#include "core/error.h"
#include "core/knobs.h"
#include "tests/common/scoped_env.h"

using namespace engine;
using engine::test_env::ScopedEnv;

namespace {

// The first column of every row of docs/knobs.md's table that names a variable: "| `ENGINE_X` |".
std::set<std::string> documented() {
  std::ifstream in(std::string(ENGINE_SOURCE_DIR) + "/docs/knobs.md");
  EXPECT_TRUE(in) << "docs/knobs.md is missing";
  std::set<std::string> names;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    const size_t end = line.find('`', 3);
    if (end != std::string::npos) names.insert(line.substr(3, end - 3));
  }
  return names;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Knobs, TheDocsTableNamesExactlyTheVariablesTheReaderKnows) {
  std::set<std::string> known;
  for (const knobs::Knob& k : knobs::all()) known.insert(k.name);
  EXPECT_EQ(known.size(), knobs::all().size()) << "a variable listed twice";
  EXPECT_EQ(documented(), known);
}

TEST(Knobs, UnsetOrEmptyGivesTheDefaults) {
  for (const knobs::Knob& k : knobs::all()) {
    ScopedEnv unset(k.name, nullptr);
    EXPECT_FALSE(knobs::given(k.name)) << k.name;
  }
  ScopedEnv algo("ENGINE_ALGO", ""), kernels("ENGINE_CUDA_KERNELS", nullptr),
      ring("ENGINE_CUDA_RING", nullptr), proto("ENGINE_RING_PROTOCOL", nullptr),
      channels("ENGINE_RING_CHANNELS", nullptr), graph("ENGINE_CUDA_GRAPH", nullptr),
      data("ENGINE_DATA_ON_DEVICE", nullptr), threads("ENGINE_THREADS", nullptr),
      guard("ENGINE_SYNC_GUARD", nullptr), isa("ENGINE_MAX_CPU_ISA", nullptr),
      host("ENGINE_COMM_HOST_ID", ""), flight("ENGINE_FLIGHT_RECORDER", nullptr);
  EXPECT_FALSE(knobs::given("ENGINE_ALGO")) << "empty is unset";
  EXPECT_EQ(knobs::algo(), "auto");
  EXPECT_EQ(knobs::cuda_kernels(), "engine");
  EXPECT_EQ(knobs::cuda_ring(), "auto");
  EXPECT_EQ(knobs::ring_protocol(), "auto");
  EXPECT_EQ(knobs::ring_channels(), 0);
  EXPECT_EQ(knobs::cuda_graph(), "auto");
  EXPECT_EQ(knobs::data_on_device(), "auto");
  EXPECT_EQ(knobs::threads(), 0);
  EXPECT_FALSE(knobs::sync_guard());
  EXPECT_EQ(knobs::max_cpu_isa(), "");
  EXPECT_EQ(knobs::comm_host_id(), "");
  EXPECT_TRUE(knobs::flight_recorder());
  EXPECT_NO_THROW(knobs::check_all());
}

TEST(Knobs, EachVariableForcesItsValue) {
  ScopedEnv algo("ENGINE_ALGO", "rd"), kernels("ENGINE_CUDA_KERNELS", "library"),
      ring("ENGINE_CUDA_RING", "ipc"), proto("ENGINE_RING_PROTOCOL", "events"),
      channels("ENGINE_RING_CHANNELS", "16"), graph("ENGINE_CUDA_GRAPH", "off"),
      data("ENGINE_DATA_ON_DEVICE", "on"), threads("ENGINE_THREADS", "3"),
      guard("ENGINE_SYNC_GUARD", "1"), isa("ENGINE_MAX_CPU_ISA", "avx2"),
      host("ENGINE_COMM_HOST_ID", "host-a"), flight("ENGINE_FLIGHT_RECORDER", "0");
  EXPECT_TRUE(knobs::given("ENGINE_ALGO"));
  EXPECT_EQ(knobs::algo(), "rd");
  EXPECT_EQ(knobs::cuda_kernels(), "library");
  EXPECT_EQ(knobs::cuda_ring(), "ipc");
  EXPECT_EQ(knobs::ring_protocol(), "events");
  EXPECT_EQ(knobs::ring_channels(), 16);
  EXPECT_EQ(knobs::cuda_graph(), "off");
  EXPECT_EQ(knobs::data_on_device(), "on");
  EXPECT_EQ(knobs::threads(), 3);
  EXPECT_TRUE(knobs::sync_guard());
  EXPECT_EQ(knobs::max_cpu_isa(), "avx2");
  EXPECT_EQ(knobs::comm_host_id(), "host-a");
  EXPECT_FALSE(knobs::flight_recorder());
}

// Every variable but the free-text host id refuses a value it does not take, in one line that
// names it, the value and what it takes; check_all finds it.
TEST(Knobs, ABadValueIsOneErrorNamingTheVariableAndItsValues) {
  for (const knobs::Knob& k : knobs::all()) {
    if (std::string(k.name) == "ENGINE_COMM_HOST_ID") continue;
    for (const char* bad : {"bogus", "99999999999999999999"}) {
      ScopedEnv set(k.name, bad);
      const std::string what = error_of(knobs::check_all);
      EXPECT_EQ(what.rfind(std::string(k.name) + "=" + bad + ": expected ", 0), 0u) << what;
      EXPECT_NE(what.find(k.values), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
  ScopedEnv blocking("ENGINE_RING_PROTOCOL", "blocking");
  EXPECT_EQ(error_of([] { knobs::ring_protocol(); }),
            "ENGINE_RING_PROTOCOL=blocking: expected auto|ll|simple|events");
}

TEST(Knobs, NumbersOutsideTheirRangeAreRefused) {
  for (const char* bad : {"33", "-1", "8x", "1.5"}) {
    ScopedEnv set("ENGINE_RING_CHANNELS", bad);
    EXPECT_EQ(error_of([] { knobs::ring_channels(); }),
              std::string("ENGINE_RING_CHANNELS=") + bad + ": expected an integer 0 .. 32");
  }
  for (const char* bad : {"0", "1025"}) {
    ScopedEnv set("ENGINE_THREADS", bad);
    EXPECT_EQ(error_of([] { knobs::threads(); }),
              std::string("ENGINE_THREADS=") + bad + ": expected an integer 1 .. 1024");
  }
  ScopedEnv guard("ENGINE_SYNC_GUARD", "yes");
  EXPECT_EQ(error_of([] { knobs::sync_guard(); }), "ENGINE_SYNC_GUARD=yes: expected 0|1");
}
