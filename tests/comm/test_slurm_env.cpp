// tests/comm/test_slurm_env.cpp: Slurm's compressed node lists expand as `scontrol show hostnames`
// expands them (the expected lists below are its output, Slurm 22.05); an unparsable list is one
// error naming the variable and its value; the store address and port of an srun step come from
// the environment, MASTER_* winning; env:// under srun needs nothing else.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "comm/rendezvous/rendezvous.h"
#include "comm/rendezvous/slurm_env.h"
#include "comm/transport/socket.h"
#include "core/error.h"
#include "tests/common/expect_error.h"
#include "tests/common/scoped_env.h"

namespace engine::comm::slurm {
namespace {

using engine::testing::expect_error;
using Hosts = std::vector<std::string>;

Hosts expand(const std::string& list) {
  return expand_hostlist(list, "SLURM_STEP_NODELIST");
}

TEST(SlurmHostlist, ExpandsAsScontrolShowHostnames) {
  EXPECT_EQ(expand("vm"), Hosts({"vm"}));
  EXPECT_EQ(expand("node[01-04,07]"), Hosts({"node01", "node02", "node03", "node04", "node07"}));
  EXPECT_EQ(expand("a[1-2],b3"), Hosts({"a1", "a2", "b3"}));
  EXPECT_EQ(expand("n[1-2]-ib[3-4]"), Hosts({"n1-ib3", "n1-ib4", "n2-ib3", "n2-ib4"}));
  EXPECT_EQ(expand("n[0-1]-ib[3-4],m5"), Hosts({"n0-ib3", "n0-ib4", "n1-ib3", "n1-ib4", "m5"}));
  EXPECT_EQ(expand("a[1-2][5-6]"), Hosts({"a15", "a16", "a25", "a26"}));
  EXPECT_EQ(expand("x[8-11]"), Hosts({"x8", "x9", "x10", "x11"}));
  EXPECT_EQ(expand("x[08-11]"), Hosts({"x08", "x09", "x10", "x11"}));
  EXPECT_EQ(expand("a[009-011]"), Hosts({"a009", "a010", "a011"}));
  EXPECT_EQ(expand("a[01-3]"), Hosts({"a01", "a02", "a03"}));  // the lower bound's width
  EXPECT_EQ(expand("a[1-03]"), Hosts({"a1", "a2", "a3"}));
  EXPECT_EQ(expand("a[001]"), Hosts({"a001"}));
  EXPECT_EQ(expand("a-[1-2]"), Hosts({"a-1", "a-2"}));
  EXPECT_EQ(expand("[1-2]"), Hosts({"1", "2"}));
  EXPECT_EQ(expand("a,b,,c"), Hosts({"a", "b", "c"}));
  EXPECT_EQ(expand(" a , b"), Hosts({"a", "b"}));
  EXPECT_EQ(expand("a b"), Hosts({"a", "b"}));
  EXPECT_EQ(expand("n1,n1"), Hosts({"n1", "n1"}));
  EXPECT_EQ(expand("a[08-11]b[1-2],c"),
            Hosts({"a08b1", "a08b2", "a09b1", "a09b2", "a10b1", "a10b2", "a11b1", "a11b2", "c"}));
  EXPECT_EQ(expand("a[99999999999-100000000000]"), Hosts({"a99999999999", "a100000000000"}));
  // Beyond Slurm 22.05 (which refuses text after the last bracket): accepted, as newer tools do.
  EXPECT_EQ(expand("node[1-2].ib"), Hosts({"node1.ib", "node2.ib"}));
  EXPECT_EQ(first_host("gpu[017-020,031],login1", "SLURM_JOB_NODELIST"), "gpu017");
}

TEST(SlurmHostlist, AnUnparsableListIsOneErrorNamingTheVariableAndItsValue) {
  for (const char* bad : {"x[010-8]", "a[]", "a[x-y]", "a[3-1]", "a[-1]", "a[1,,2]", "a[1-2,]",
                          "a[1-2-3]", "a[1-2", "a]", "a[[1]]", "a[ 1-2]", ",", "", "a[1-9999999]"})
    expect_error([&] { expand(bad); }, {"SLURM_STEP_NODELIST='" + std::string(bad) + "': "});
  expect_error([] { expand("node[1-"); }, {"'[' without ']'", "node[01-04,07]"});
  expect_error([] { expand("a[3-1]"); }, {"range '3-1' runs backwards"});
  expect_error([] { expand("a[1-9999999]"); }, {"more than 2^20 hosts"});
}

// An environment of its own for the functions that take a Getenv.
struct FakeEnv {
  std::map<std::string, std::string> vars;
  Getenv fn() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() || it->second.empty() ? nullptr : it->second.c_str();
    };
  }
};

TEST(SlurmEnv, PortComesFromJobAndStepInADocumentedRange) {
  EXPECT_EQ(derive_port(0, 0), 12000);
  EXPECT_EQ(derive_port(1, 0), 12008);
  EXPECT_EQ(derive_port(1, 3), 12011);
  EXPECT_EQ(derive_port(2500, 0), 12000);  // wraps after 2,500 jobs
  for (uint64_t job : {0ull, 7ull, 123456789ull, 18446744073709551615ull})
    for (uint64_t step : {0ull, 1ull, 4294967294ull}) {
      EXPECT_GE(derive_port(job, step), 12000);
      EXPECT_LT(derive_port(job, step), 32000);
    }
}

TEST(SlurmEnv, StoreAddressFromTheStepsFirstHostUnlessMasterIsSet) {
  FakeEnv e{{{"SLURM_JOB_ID", "42"},
             {"SLURM_STEP_ID", "1"},
             {"SLURM_JOB_NODELIST", "big[1-9]"},
             {"SLURM_STEP_NODELIST", "node[07-08]"}}};
  StoreAddress a = store_address(e.fn());
  EXPECT_EQ(a.host, "node07");
  EXPECT_EQ(a.host_from, "SLURM_STEP_NODELIST");
  EXPECT_EQ(a.port, derive_port(42, 1));
  e.vars.erase("SLURM_STEP_NODELIST");
  EXPECT_EQ(store_address(e.fn()).host, "big1");
  e.vars["MASTER_PORT"] = "29500";
  EXPECT_EQ(store_address(e.fn()).port, 29500);
  e.vars["MASTER_ADDR"] = "10.1.2.3";
  EXPECT_EQ(store_address(e.fn()).host, "10.1.2.3");
  EXPECT_EQ(resolved_store_address(e.fn()).host, "10.1.2.3");
  e.vars["MASTER_PORT"] = "70000";
  expect_error([&] { store_address(e.fn()); }, {"MASTER_PORT='70000'"});
}

TEST(SlurmEnv, MissingOrBadVariablesAreNamed) {
  FakeEnv e{{{"SLURM_JOB_ID", "12x"}, {"SLURM_STEP_NODELIST", "n[1-2"}}};
  expect_error([&] { store_address(e.fn()); }, {"SLURM_STEP_NODELIST='n[1-2'"});
  e.vars["SLURM_STEP_NODELIST"] = "n[1-2]";
  expect_error([&] { store_address(e.fn()); }, {"SLURM_JOB_ID='12x' is not a number"});
  e.vars.erase("SLURM_JOB_ID");
  expect_error([&] { store_address(e.fn()); }, {"MASTER_PORT", "SLURM_JOB_ID"});
  e.vars.erase("SLURM_STEP_NODELIST");
  expect_error([&] { store_address(e.fn()); }, {"MASTER_ADDR", "SLURM_STEP_NODELIST"});
}

TEST(SlurmEnv, FirstHostIsResolvedWithAnErrorNamingTheList) {
  FakeEnv e{{{"SLURM_JOB_ID", "5"}, {"SLURM_STEP_NODELIST", "localhost,other"}}};
  EXPECT_EQ(resolved_store_address(e.fn()).host, "127.0.0.1");
  e.vars["SLURM_STEP_NODELIST"] = "no-such-host.invalid,b";
  expect_error([&] { resolved_store_address(e.fn()); },
               {"cannot resolve 'no-such-host.invalid'",
                "SLURM_STEP_NODELIST='no-such-host.invalid,b'", "set MASTER_ADDR"});
}

TEST(SlurmEnv, InStepOnlyUnderSrun) {
  FakeEnv batch{{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "3"}}};
  EXPECT_FALSE(in_step(batch.fn()));  // an sbatch script's own environment
  batch.vars["SLURM_STEP_ID"] = "0";
  EXPECT_TRUE(in_step(batch.fn()));
}

TEST(SlurmEnv, LocalTaskCountFromTasksPerNode) {
  FakeEnv e;
  EXPECT_EQ(local_task_count(e.fn()), 0);
  e.vars = {{"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_TASKS_PER_NODE", "9"}};
  EXPECT_EQ(local_task_count(e.fn()), 2);
  e.vars["SLURM_NODEID"] = "2";
  EXPECT_EQ(local_task_count(e.fn()), 2);
  e.vars["SLURM_NODEID"] = "3";
  EXPECT_EQ(local_task_count(e.fn()), 1);
  e.vars.erase("SLURM_STEP_TASKS_PER_NODE");
  expect_error([&] { local_task_count(e.fn()); },
               {"SLURM_TASKS_PER_NODE='9' has no entry for SLURM_NODEID=3"});
  e.vars["SLURM_NODEID"] = "0";
  EXPECT_EQ(local_task_count(e.fn()), 9);
  e.vars["SLURM_TASKS_PER_NODE"] = "2(x";
  expect_error([&] { local_task_count(e.fn()); }, {"SLURM_TASKS_PER_NODE='2(x'"});
}

// Sets environment variables for one test and restores them.
class ScopedEnv {
 public:
  void set(const char* name, const std::string& value) {
    const char* old = std::getenv(name);
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it)
      it->second ? ::setenv(it->first.c_str(), it->second->c_str(), 1)
                 : ::unsetenv(it->first.c_str());
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// The environment srun gives one task, and nothing from a launcher around this test.
void srun_task(ScopedEnv& env, int rank, int tasks, const std::string& job,
               const std::string& nodelist) {
  for (const char* v : {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                        "MASTER_ADDR", "MASTER_PORT"})
    env.set(v, "");
  env.set("SLURM_PROCID", std::to_string(rank));
  env.set("SLURM_NTASKS", std::to_string(tasks));
  env.set("SLURM_STEP_ID", "0");
  env.set("SLURM_JOB_ID", job);
  env.set("SLURM_STEP_NODELIST", nodelist);
}

TEST(SlurmEnv, EnvInitUnderSrunNeedsNoMasterVariables) {
  ScopedEnv env;
  // A job id whose derived port is free now.
  uint64_t job = static_cast<uint64_t>(getpid());
  for (int tries = 0; tries < 20; ++tries, job += 7) {
    try {
      listen_tcp("", derive_port(job, 0), "probe");
      break;
    } catch (const Error&) {
    }
  }
  srun_task(env, 0, 1, std::to_string(job), "localhost");
  InitOptions o;
  o.connect.timeout = Millis(5000);
  InitTarget t = resolve_init_method(o);
  EXPECT_EQ(t.rank, 0);
  EXPECT_EQ(t.world_size, 1);
  ASSERT_TRUE(t.store);
  t.store->set("k", "v");
  EXPECT_EQ(t.store->get("k"), "v");
}

TEST(SlurmEnv, EnvInitUnderSrunWithABadNodeListNamesIt) {
  ScopedEnv env;
  srun_task(env, 1, 2, "7", "node[1-2,");
  expect_error([] { resolve_init_method(InitOptions{}); }, {"SLURM_STEP_NODELIST='node[1-2,'"});
}

// A process started alone (no launcher's variables, no world size) or in a world of one joins no
// job: no store is made, nothing listens.
TEST(JoinJob, AProcessAloneOrAWorldOfOneConnectsNothing) {
  using test_env::ScopedEnv;
  ScopedEnv world("WORLD_SIZE", nullptr), ompi("OMPI_COMM_WORLD_SIZE", nullptr),
      step("SLURM_STEP_ID", nullptr), procid("SLURM_PROCID", nullptr),
      tasks("SLURM_NTASKS", nullptr), job("SLURM_JOB_ID", nullptr);
  InitOptions o;
  EXPECT_EQ(join_job(o), nullptr);
  o.init_method = "tcp://127.0.0.1:1";  // never contacted
  o.world_size = 1;
  o.rank = 0;
  EXPECT_EQ(join_job(o), nullptr);
}

}  // namespace
}  // namespace engine::comm::slurm
