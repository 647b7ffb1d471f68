// tests/parallel/test_straggler.cpp: naming the rank that makes everyone wait (parallel/
// straggler.h): the score on hand-made times, and ranks as threads where one sleeps before each
// collective, over the in-memory transport.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "comm/health/flight_recorder.h"
#include "comm/rendezvous/rendezvous.h"
#include "parallel/straggler.h"
#include "tests/parallel/parallel_test_util.h"

namespace engine::parallel {
namespace {

// Rank 2 comes last into 9 of 10 collectives (it spends 1 ms inside, the others 11): named, with
// its share and lateness, and what the others waited.
TEST(Straggler, TheRankThatSpendsLeastTimeInsideCameLast) {
  std::vector<std::vector<double>> inside(3, std::vector<double>(10, 0.011));
  for (int i = 0; i < 9; ++i) inside[2][i] = 0.001;
  inside[0][9] = 0.001;  // once rank 0 came last
  const StragglerScore s = score_stragglers(inside, {0.3, 0.3, 0.4}, 10);
  EXPECT_EQ(s.collectives, 10);
  EXPECT_EQ(s.rank, 2);
  EXPECT_DOUBLE_EQ(s.share, 0.9);
  EXPECT_NEAR(s.late_ms, 10.0, 1e-9);
  EXPECT_TRUE(s.stands_out);
  EXPECT_NEAR(s.wait_ms_per_step(0), 9 * 10.0 / 10, 1e-9);
  EXPECT_NEAR(s.compute_ms_per_step(2), 40.0, 1e-9);
  EXPECT_EQ(straggler_line(s),
            "rank 2 is the straggler: last into 90% of collectives, 10.0 ms late on average "
            "(its step computes 40 ms, the others 30 ms)");
}

// An even run: the last rank changes from collective to collective, nobody waits long.
TEST(Straggler, NoRankStandsOutInAnEvenRun) {
  std::vector<std::vector<double>> inside(3, std::vector<double>(9, 0.0011));
  for (int i = 0; i < 9; ++i) inside[i % 3][i] = 0.001;
  const StragglerScore s = score_stragglers(inside, {0.3, 0.3, 0.3}, 9);
  EXPECT_FALSE(s.stands_out);
  EXPECT_NEAR(s.share, 1.0 / 3, 1e-12);
}

// Last most often but nobody waits for it noticeably (under 20% of a step): not named. Collectives
// a rank did not record are left out; intervals add up.
TEST(Straggler, ALateRankThatCostsNothingIsNotNamedAndIntervalsAddUp) {
  std::vector<std::vector<double>> inside(2, std::vector<double>(4, 0.0002));
  inside[1] = {0.0001, 0.0001, 0.0001, -1};
  StragglerScore s = score_stragglers(inside, {1.0, 1.0}, 10);
  EXPECT_EQ(s.collectives, 3);
  EXPECT_EQ(s.rank, 1);
  EXPECT_FALSE(s.stands_out);
  StragglerScore total;
  total.add(s);
  total.add(s);
  EXPECT_EQ(total.collectives, 6);
  EXPECT_EQ(total.steps, 20);
  EXPECT_EQ(total.rank, 1);
}

// Three ranks as threads, an all_reduce a step; rank 1 sleeps 3 ms before each of the first 20,
// then every rank 1 ms before each of 10 more: every rank's watch names it after the first
// interval and says it recovered at the epoch's end.
TEST(Straggler, ASleepingThreadIsNamedByEveryRankAndItsRecoverySaid) {
  if (!comm::FlightRecorder::get().on()) GTEST_SKIP() << "ENGINE_FLIGHT_RECORDER=0";
  auto comms = comm::make_mem_communicators(3);
  std::vector<std::optional<StragglerScore>> got(3);
  std::vector<std::vector<std::string>> lines(3);
  testing::expect_no_errors(testing::run_threads(3, [&](int r) {
    StragglerWatch w;
    w.begin_epoch(*comms[r]);
    std::vector<float> x(1000, 1.0f);
    for (int i = 0; i < 30; ++i) {  // one interval of 20 steps, then 10 and the epoch's end
      // Then every rank takes 1 ms a step: nobody waits long for anybody.
      std::this_thread::sleep_for(std::chrono::milliseconds(i >= 20 ? 1 : r == 1 ? 3 : 0));
      comms[r]->all_reduce(x.data(), x.size(), DType::F32);
      if (std::string l = w.step(*comms[r], false); !l.empty()) lines[r].push_back(l);
    }
    if (std::string l = w.step(*comms[r], true); !l.empty()) lines[r].push_back(l);
    got[r] = w.epoch();
  }));
  for (int r = 0; r < 3; ++r) {  // named after the first interval, and its recovery said
    ASSERT_EQ(lines[r].size(), 2u) << r;
    EXPECT_EQ(lines[r][0].rfind("rank 1 is the straggler: last into ", 0), 0u) << lines[r][0];
    EXPECT_EQ(lines[r][1].rfind("rank 1 is no longer the straggler (", 0), 0u) << lines[r][1];
  }
  for (int r = 0; r < 3; ++r) {  // over the epoch: the 20 slow steps of 30 make it the one
    ASSERT_TRUE(got[r]) << r;
    EXPECT_EQ(got[r]->collectives, 30);  // the intervals' own gathers left out
    EXPECT_EQ(got[r]->steps, 30);
    EXPECT_EQ(got[r]->rank, 1) << straggler_line(*got[r]);
    EXPECT_GT(got[r]->late_ms, 1.0);
  }
}

}  // namespace
}  // namespace engine::parallel
