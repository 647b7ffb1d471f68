// tests/apps/test_srun.cpp: `srun -n 2 train ...` on a real, throwaway single-node Slurm
// (scripts/slurm_local.sh, started once per test process on first use and always stopped) trains
// exactly like one rank with no MASTER_* set; an unparsable node list is one error naming it; an
// sbatch script's own environment (SLURM_NTASKS without a step) trains as one process.
#include <unistd.h>

#include <filesystem>

#include "tests/apps/train_fixture.h"

using namespace engine;
using namespace engine::testing;

namespace {

// scripts/slurm_local.sh of this source tree. __FILE__ is relative to build/tests when ccache's
// base_dir rewrites the paths, absolute otherwise.
std::string slurm_script() {
  fs::path src = __FILE__;
  if (src.is_relative()) src = fs::path(kBuild) / "tests" / src;
  return fs::weakly_canonical(src.parent_path() / ".." / ".." / "scripts" / "slurm_local.sh");
}
const std::string kScript = slurm_script();

// Clears every SLURM_* and MASTER_* variable a surrounding job may have set, for one shell line.
const std::string kCleanEnv =
    "for v in $(env | sed -n 's/^\\(SLURM_[A-Za-z0-9_]*\\)=.*/\\1/p'); do unset $v; done; "
    "unset MASTER_ADDR MASTER_PORT RANK WORLD_SIZE; ";

// The cluster of this test process: started by the first test that asks, stopped at the end.
class SlurmCluster : public ::testing::Environment {
 public:
  // The SLURM_CONF of a running cluster, or "" with the reason to skip in *why.
  const std::string& conf(std::string* why) {
    if (!tried_) start();
    *why = why_;
    return conf_;
  }
  void TearDown() override {
    if (dir_.empty()) return;
    RunResult r = run(kScript + " stop " + dir_);
    EXPECT_EQ(r.code, 0) << r.output;
    dir_.clear();
  }

 private:
  void start() {
    tried_ = true;
    if (geteuid() != 0) return void(why_ = "slurmd needs root to start tasks");
    if (run("for t in srun slurmctld slurmd munged; do command -v $t || exit 1; done").code != 0)
      return void(why_ = "slurm-wlm or munge is not installed (apt-get install slurm-wlm munge)");
    // --watch: the daemons go away with this process even if it dies before TearDown.
    RunResult r = run(kScript + " start --watch " + std::to_string(getpid()));
    const std::string key = "ENGINE_SLURM_DIR=", conf_key = "SLURM_CONF=";
    const size_t at = r.output.find(key), conf_at = r.output.find(conf_key);
    if (r.code != 0 || at == std::string::npos || conf_at == std::string::npos)
      return void(why_ = "the throwaway cluster did not come up: " + r.output);
    dir_ = r.output.substr(at + key.size(), r.output.find('\n', at) - at - key.size());
    conf_ = r.output.substr(conf_at + conf_key.size(),
                            r.output.find(' ', conf_at) - conf_at - conf_key.size());
  }
  bool tried_ = false;
  std::string why_, conf_, dir_;
};

SlurmCluster* const cluster =
    static_cast<SlurmCluster*>(::testing::AddGlobalTestEnvironment(new SlurmCluster));

const std::string kArgs =
    " --model linear --dropout 0 --sharding sampler --shuffle off --batch-size 128 --steps 20 "
    "--epochs 5 --data-dir ";

}  // namespace

TEST_F(TrainTest, SrunTwoTasksTrainLikeOneRankWithNoOtherVariable) {
  std::string why;
  const std::string conf = cluster->conf(&why);
  if (conf.empty()) GTEST_SKIP() << why;
  RunResult one = run(kTrain + kArgs + data_ + " --threads 2 --save " + path("one.safetensors"));
  ASSERT_EQ(one.code, 0) << one.output;
  // The exact command of docs/launchers.md, with the cluster's SLURM_CONF and nothing else.
  const std::string srun = "SLURM_CONF=" + conf + " timeout -k 5 120 srun -n 2 " + kTrain + kArgs +
                           data_ + " --timeout 60 --save " + path("two.safetensors");
  RunResult two = run(kCleanEnv + srun);
  ASSERT_EQ(two.code, 0) << srun << "\n" << two.output;
  EXPECT_NE(two.output.find("World 2"), std::string::npos) << two.output;
  EXPECT_LT(max_rel_diff(path("one.safetensors"), path("two.safetensors")), 1e-5);
}

// `train` with these Slurm variables only (no srun, no cluster needed).
RunResult train_with(const std::string& vars, const std::string& data) {
  return run(kCleanEnv + vars + " " + kTrain +
             " --model linear --steps 2 --timeout 10 --data-dir " + data);
}

TEST_F(TrainTest, SrunWithAnUnparsableNodeListNamesTheVariableAndItsValue) {
  // The environment srun gives task 1 of 2, with a broken node list.
  RunResult r = train_with(
      "SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_STEP_ID=0 SLURM_JOB_ID=7 "
      "SLURM_STEP_NODELIST='node[01-04,07'",
      data_);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("SLURM_STEP_NODELIST='node[01-04,07': '[' without ']'"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

TEST_F(TrainTest, AnSbatchScriptsOwnEnvironmentTrainsAsOneProcess) {
  // sbatch -n 2 runs its script with SLURM_NTASKS=2 and SLURM_PROCID=0 but no step: `train` run
  // there directly (without srun) is one process, not rank 0 waiting for a rank 1.
  const std::string sbatch_env =
      "SLURM_JOB_ID=9 SLURM_NTASKS=2 SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_NODELIST=vm "
      "SLURM_TASKS_PER_NODE=2";
  const RunResult r = train_with(sbatch_env, data_);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("Test set"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("World"), std::string::npos) << "not a job of 2 ranks: " << r.output;
}
