// tests/apps/test_restarts.cpp: restarts that resume exactly. A job started with
// `--checkpoint F --checkpoint-every K --resume auto` under `launch --max-restarts 1` or torchrun
// `--max_restarts 1` has one rank SIGKILLed mid-run (right after a checkpoint, or between two);
// the launcher starts every rank again, they go on from F, and the job ends with weights byte for
// byte those of an undisturbed run, printing the same epoch lines. Also: launch's restarts with
// shell ranks, and the tutorial's batch arithmetic (3 ranks, batch 128).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <set>

#include "tests/apps/job_control.h"
#include "tests/apps/train_fixture.h"
#include "tests/common/standalone_lock.h"

using namespace engine;
using namespace engine::testing;

namespace {

enum class Launcher { Launch, Torchrun };

// Where the rank is killed: on rank 0's progress line `text`, or right after the n-th checkpoint.
struct Moment {
  int rank = 1;
  std::string progress_line;  // e.g. "Rank 0, epoch 0, batch 100/"
  int checkpoint_writes = 0;  // used when progress_line is empty
};

class Restarts : public TrainTest {
 protected:
  // 512 images, batch 4 over 2 ranks: 128 steps an epoch, 3 epochs (every kill below leaves at
  // least 230 steps to go, time for the test to find its victim); checkpoints every 30 steps.
  std::vector<std::string> train_args(const std::string& save) const {
    return words(kTrain + " --model " + model_ +
                 " --epochs 3 --batch-size 4 --threads 1 --timeout 60 " + "--data-dir " + data_ +
                 " --checkpoint " + path("ck.safetensors") +
                 " --checkpoint-every 30 --resume auto --save " + save);
  }
  std::vector<std::string> launcher(Launcher l) const {
    if (l == Launcher::Torchrun)  // --monitor_interval: notice the killed rank within 0.5 s
      return words(
          "/usr/bin/torchrun --standalone --nproc_per_node 2 --max_restarts 1 --redirects 1 "
          "--tee 1 --monitor_interval 0.5 --no_python");
    return words(kLaunchBin + " --nproc-per-node 2 --master-port " + std::to_string(port()) +
                 " --max-restarts 1 --");
  }
  std::vector<std::string> command(Launcher l, const std::string& save) const {
    std::vector<std::string> v = launcher(l), t = train_args(save);
    v.insert(v.end(), t.begin(), t.end());
    return v;
  }

  std::string model_ = "linear";

  // An undisturbed run (under launch), then one under `l` killed at `when`: the same weights,
  // byte for byte, and the same epoch and test lines; the restarted job went on from a checkpoint
  // at most 30 steps back.
  void expect_exact_restart(Launcher l, const Moment& when, int64_t min_resume_step) {
    Job plain(command(Launcher::Launch, path("plain.safetensors")));
    ASSERT_EQ(plain.finish(120), 0) << plain.output();
    fs::remove(path("ck.safetensors"));

    WriteWatch watch(dir_.string(), "ck.safetensors");
    Job job(command(l, path("killed.safetensors")));
    const bool reached = when.progress_line.empty()
                             ? watch.wait_for_writes(when.checkpoint_writes, job, 60)
                             : job.wait_for_output(when.progress_line, 60);
    ASSERT_TRUE(reached) << job.output();
    const pid_t victim = find_rank(job.pid(), when.rank);
    ASSERT_GT(victim, 0) << "rank " << when.rank << " not found\n" << job.output();
    ASSERT_EQ(::kill(victim, SIGKILL), 0);
    ASSERT_EQ(job.finish(120), 0) << job.output();

    const std::string out = job.output();
    std::smatch m;
    ASSERT_TRUE(std::regex_search(
        out, m, std::regex(R"(Resumed from \S+ at epoch \d+, batch \d+, step (\d+))")))
        << out;
    EXPECT_GE(std::stoll(m[1].str()), min_resume_step) << out;
    EXPECT_EQ(read_text(path("plain.safetensors")), read_text(path("killed.safetensors")))
        << "the restarted job's weights differ from the undisturbed run's";
    // Every epoch line printed (before the kill or after the resume) is the undisturbed one.
    for (const std::string head : {"Rank 0, epoch", "Test set"}) {
      const std::vector<std::string> want = lines_starting(plain.output(), head);
      ASSERT_EQ(want.size(), 3u) << plain.output();
      const std::vector<std::string> got = lines_starting(out, head);
      for (const std::string& line : got)
        EXPECT_NE(std::find(want.begin(), want.end(), line), want.end()) << line << "\n" << out;
      for (const std::string& line : want)
        EXPECT_NE(std::find(got.begin(), got.end(), line), got.end()) << line << "\n" << out;
    }
  }
};

bool torchrun_usable() {
  return std::system("/usr/bin/python3 -c 'import torch.distributed.run' >/dev/null 2>&1") == 0 &&
         fs::exists("/usr/bin/torchrun");
}

}  // namespace

// Between checkpoints: rank 0 prints batch 100 (checkpoints at steps 90 and 120).
TEST_F(Restarts, LaunchRankKilledBetweenCheckpoints) {
  expect_exact_restart(Launcher::Launch, {1, "Rank 0, epoch 0, batch 100/", 0}, 90);
}

// Checkpoints are written at steps 30, 60, 90, 120, 128 (the end of epoch 0), 150, ...
// Rank 0, which writes them, killed right after its 6th (step 150, epoch 1 batch 22).
// The net has dropout: its generators' state travels in the checkpoint too.
TEST_F(Restarts, LaunchWriterKilledRightAfterACheckpoint) {
  model_ = "net";
  expect_exact_restart(Launcher::Launch, {0, "", 6}, 150);
}

// Right after the checkpoint of the end of epoch 0 (step 128).
TEST_F(Restarts, LaunchRankKilledRightAfterAnEpochCheckpoint) {
  expect_exact_restart(Launcher::Launch, {1, "", 5}, 128);
}

// torchrun shows the ranks' output late (it tails their log files), so the moment is the 2nd
// checkpoint (step 60), seen at once.
TEST_F(Restarts, TorchrunStandaloneRankKilledMidEpoch) {
  if (!torchrun_usable()) GTEST_SKIP() << "/usr/bin/torchrun (Debian's python3-torch) is missing";
  StandaloneLock lock;
  expect_exact_restart(Launcher::Torchrun, {1, "", 2}, 60);
}

// launch alone, with shell ranks: a failed job starts again with TORCHELASTIC_RESTART_COUNT
// counting up; when restarts run out launch exits with the failed rank's code.
TEST(LaunchRestarts, StartsEveryRankAgainUpToMaxRestarts) {
  const std::string rank_sh =
      "echo start $RANK $TORCHELASTIC_RESTART_COUNT $TORCHELASTIC_MAX_RESTARTS; "
      "[ $RANK = 1 ] && [ $TORCHELASTIC_RESTART_COUNT -lt 2 ] && exit 3; exit 0";
  RunResult ok =
      run(kLaunchBin + " --nproc-per-node 2 --max-restarts 2 -- /bin/sh -c '" + rank_sh + "'");
  EXPECT_EQ(ok.code, 0) << ok.output;
  for (const char* want : {"[rank 1] start 1 0 2", "[rank 1] start 1 1 2", "[rank 1] start 1 2 2",
                           "[rank 0] start 0 2 2", "restarting every rank (restart 2 of 2)"})
    EXPECT_NE(ok.output.find(want), std::string::npos) << want << "\n" << ok.output;
  RunResult failed =
      run(kLaunchBin + " --nproc-per-node 2 --max-restarts 1 -- /bin/sh -c '" + rank_sh + "'");
  EXPECT_EQ(failed.code, 3) << failed.output;
  EXPECT_NE(failed.output.find("[rank 1] start 1 1 1"), std::string::npos) << failed.output;
  EXPECT_EQ(failed.output.find("start 1 2"), std::string::npos) << failed.output;
  RunResult bad = run(kLaunchBin + " --nproc-per-node 1 --max-restarts -1 -- /bin/true");
  EXPECT_EQ(bad.code, 2) << bad.output;
}

// The tutorial's bsz = int(128 / float(size)): 3 ranks, batch 128 -> 42 images each.
TEST_F(TrainTest, ABatchTheWorldDoesNotDivideIsCutAsTheTutorialDoes) {
  RunResult r =
      run(kLaunchBin + " --nproc-per-node 3 --master-port " + std::to_string(port()) + " -- " +
          kTrain + " --model linear --epochs 1 --timeout 60 --data-dir " + data_);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string line =
      "[rank 0] --batch-size 128 does not divide by 3 ranks: each rank takes int(128 / 3) = 42 "
      "images per step (126 in all), as the tutorial does\n";
  EXPECT_NE(r.output.find(line), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("does not divide", r.output.find(line) + line.size()), std::string::npos)
      << "one line, from rank 0: " << r.output;
  EXPECT_NE(r.output.find("42 images per rank per step"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[rank 0] Rank 0, epoch 0: "), std::string::npos) << r.output;
}

TEST_F(TrainTest, CheckpointFlagsWithoutACheckpointFileAreUsageErrors) {
  for (const auto& [flags, message] : std::vector<std::pair<std::string, std::string>>{
           {"--checkpoint-every 5", "--checkpoint-every needs --checkpoint FILE"},
           {"--resume auto", "--resume auto resumes from --checkpoint FILE: give --checkpoint"},
           {"--checkpoint-every -1 --checkpoint x", "--checkpoint-every must be 0 or more"}}) {
    RunResult r = run(kTrain + " --model linear --data-dir " + data_ + " " + flags);
    EXPECT_EQ(r.code, 2) << flags << ": " << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << flags << ": " << r.output;
  }
}

// A mid-epoch checkpoint of an older train (no engine.epoch_loss_sums) still resumes bit for bit.
TEST_F(TrainTest, AnOldMidEpochCheckpointStillResumesBitForBit) {
  const std::string common =
      kTrain + " --model linear --epochs 1 --batch-size 16 --threads 1 --data-dir " + data_;
  RunResult plain = run(common + " --save " + path("a.safetensors"));
  ASSERT_EQ(plain.code, 0) << plain.output;
  RunResult first = run(common + " --steps 7 --checkpoint " + path("ck.safetensors"));
  ASSERT_EQ(first.code, 0) << first.output;
  StFile ck = load_safetensors(path("ck.safetensors"));
  ASSERT_EQ(ck.metadata.erase("engine.epoch_loss_sums"), 1u);
  save_safetensors(path("ck.safetensors"), ck.entries, ck.metadata);
  RunResult rest =
      run(common + " --resume " + path("ck.safetensors") + " --save " + path("b.safetensors"));
  ASSERT_EQ(rest.code, 0) << rest.output;
  EXPECT_NE(rest.output.find("at epoch 0, batch 7, step 7"), std::string::npos) << rest.output;
  EXPECT_EQ(read_text(path("a.safetensors")), read_text(path("b.safetensors")));
}
