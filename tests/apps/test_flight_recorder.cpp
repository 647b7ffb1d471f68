// tests/apps/test_flight_recorder.cpp: `train --flight-recorder DIR` (issue 36): the dumps of a
// job whose rank froze (the survivors' last collective failed, naming it), a snapshot on SIGUSR1
// while training goes on, and a dump on SIGTERM before the rank ends as the signal ends it.
#include <signal.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "io/json.h"
#include "tests/apps/job_control.h"
#include "tests/apps/train_fixture.h"

using namespace engine;
using namespace engine::testing;

namespace {

class FlightDumps : public TrainTest {
 protected:
  // `world` ranks by hand over TCP (rank 0 serves the store), 30 epochs of the net: long enough
  // for the signals below; a checkpoint every 4 steps tells the test the job is training.
  std::vector<std::unique_ptr<Job>> start(int world, double timeout_s) {
    std::vector<std::unique_ptr<Job>> ranks;
    const std::string common =
        kTrain + " --model net --epochs 30 --batch-size 64 --threads 1 --timeout " +
        std::to_string(timeout_s) + " --data-dir " + data_ + " --checkpoint " +
        path("ck.safetensors") + " --checkpoint-every 4 --flight-recorder " + dumps_ +
        " --init-method tcp://127.0.0.1:" + std::to_string(port()) + " --world-size " +
        std::to_string(world) + " --rank ";
    for (int r = 0; r < world; ++r)
      ranks.push_back(std::make_unique<Job>(words(common + std::to_string(r))));
    WriteWatch watch(dir_.string(), "ck.safetensors");
    EXPECT_TRUE(watch.wait_for_writes(1, *ranks[0], 60)) << ranks[0]->output();
    return ranks;
  }
  Json dump(int rank) const {
    const std::string f = dumps_ + "/rank" + std::to_string(rank) + ".json";
    return parse_json(read_text(f), f);
  }
  const std::string dumps_ = path("flight");
};

// Rank 1 frozen: ranks 0 and 2 fail within --timeout, and each one's dump ends with the
// collective it waited in, failed, naming rank 1.
TEST_F(FlightDumps, TheSurvivorsOfAFrozenRankDumpTheCollectiveTheyWaitedIn) {
  auto ranks = start(3, 2);
  ASSERT_EQ(::kill(ranks[1]->pid(), SIGSTOP), 0);
  for (int r : {0, 2}) {
    EXPECT_EQ(ranks[r]->finish(60), 1) << ranks[r]->output();
    const Json d = dump(r);
    EXPECT_EQ(d["rank"], r);
    EXPECT_EQ(d["world"], 3);
    EXPECT_NE(d["reason"].get<std::string>().find("rank 1 is frozen"), std::string::npos)
        << d["reason"];
    const Json& last = d["entries"].back();
    EXPECT_EQ(last["state"], "failed") << last;
    EXPECT_EQ(last["waiting_for"], Json::array({1})) << last;
    EXPECT_GT(d["recorded"].get<int64_t>(), 10);
  }
  ::kill(ranks[1]->pid(), SIGKILL);
  // flight_report reads them: its verdict, first, names the frozen rank and the collective.
  const RunResult r = run(kBuild + "/apps/flight_report " + dumps_);
  EXPECT_EQ(r.code, 0) << r.output;
  const std::string verdict = r.output.substr(0, r.output.find('\n'));
  EXPECT_NE(verdict.find("ranks 0, 2 failed in #"), std::string::npos) << r.output;
  EXPECT_NE(verdict.find("waiting for rank 1"), std::string::npos) << r.output;
}

// SIGUSR1: a snapshot appears while both ranks train on to the end.
TEST_F(FlightDumps, SigusrOneWritesASnapshotAndTheJobGoesOn) {
  auto ranks = start(2, 60);
  ASSERT_EQ(::kill(ranks[1]->pid(), SIGUSR1), 0);
  const std::string f = dumps_ + "/rank1.json";
  for (int i = 0; i < 500 && !std::filesystem::exists(f); ++i) ranks[1]->pump(10);
  ASSERT_TRUE(std::filesystem::exists(f)) << ranks[1]->output();
  const Json d = dump(1);
  EXPECT_EQ(d["reason"], "SIGUSR1");
  EXPECT_GT(d["entries"].size(), 0u);
  for (auto& r : ranks) EXPECT_EQ(r->finish(120), 0) << r->output();
}

// SIGTERM: the rank writes its dump, then ends as SIGTERM ends a process (128 + 15).
TEST_F(FlightDumps, SigtermWritesADumpThenEndsTheRank) {
  auto ranks = start(2, 60);
  ASSERT_EQ(::kill(ranks[0]->pid(), SIGTERM), 0);
  EXPECT_EQ(ranks[0]->finish(60), 128 + SIGTERM) << ranks[0]->output();
  EXPECT_EQ(dump(0)["reason"], "SIGTERM");
  EXPECT_EQ(ranks[1]->finish(60), 1) << ranks[1]->output();  // its peer went away
  EXPECT_NE(dump(1)["reason"].get<std::string>().find("rank 0 is gone"), std::string::npos);
}

// SIGTERM to launch of two ranks: it forwards it, both ranks write their dumps and end within the
// grace period, and launch exits 143, as torchrun does.
TEST_F(FlightDumps, AStoppedLauncherStopsItsRanksAndEachLeavesItsDump) {
  Job job(words(kLaunchBin + " --nproc-per-node 2 --stop-grace 10 --master-port " +
                std::to_string(port()) + " -- " + kTrain +
                " --model net --epochs 30 --batch-size 64 --threads 1 --data-dir " + data_ +
                " --checkpoint " + path("ck.safetensors") + " --checkpoint-every 4" +
                " --flight-recorder " + dumps_));
  WriteWatch watch(dir_.string(), "ck.safetensors");
  ASSERT_TRUE(watch.wait_for_writes(1, job, 60)) << job.output();
  const pid_t ranks[] = {find_rank(job.pid(), 0), find_rank(job.pid(), 1)};
  ASSERT_GT(ranks[0], 0);
  ASSERT_GT(ranks[1], 0);
  const auto t0 = Clock::now();
  ASSERT_EQ(::kill(job.pid(), SIGTERM), 0);
  EXPECT_EQ(job.finish(60), 128 + SIGTERM) << job.output();
  EXPECT_LT(since(t0), 10.0) << job.output();
  for (pid_t p : ranks) EXPECT_NE(::kill(p, 0), 0) << "rank process " << p << " is left";
  for (int r : {0, 1}) EXPECT_EQ(dump(r)["reason"], "SIGTERM") << job.output();
}

}  // namespace
