// tests/report/test_progress.cpp: train's progress line (report/progress.h): the bar fits every
// terminal width, shortening then dropping its fields; the count ends where the run ends under
// --steps and --resume; the plain line; the terminal's width.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "report/progress.h"

namespace {

using namespace engine::report;

ProgressState state(int64_t done = 120, int64_t end = 300) {
  ProgressState s;
  s.rank = 0;
  s.epoch = 1;
  s.done = done;
  s.end = end;
  s.loss = 0.4321;
  s.images_per_s = 1234;
  s.seconds_left = 12;
  return s;
}

TEST(ProgressEnd, TheEpochOrTheRunsStepLimitWhicheverComesFirst) {
  EXPECT_EQ(progress_end(469, 0, -1), 469) << "no --steps";
  EXPECT_EQ(progress_end(469, 0, 300), 300) << "--steps 300";
  EXPECT_EQ(progress_end(469, 0, 1000), 469) << "--steps past the epoch";
  EXPECT_EQ(progress_end(469, 200, 100), 300) << "--resume at batch 200, step 200, --steps 300";
  EXPECT_EQ(progress_end(469, 200, -1), 469) << "--resume without --steps";
  EXPECT_EQ(progress_end(469, 0, 131), 131) << "--steps 600: the second epoch's part";
  EXPECT_EQ(progress_end(469, 0, 0), 0);
}

TEST(ProgressBar, FullLineWithA30WideBarWhenThereIsRoom) {
  EXPECT_EQ(progress_bar_line(state(), 200),
            "Rank 0, epoch 1 [############..................] 120/300  loss 0.4321  1234 "
            "images/s  12s left");
  EXPECT_EQ(progress_bar_line(state(300, 300), 200).substr(0, 48),
            "Rank 0, epoch 1 [##############################]");
}

TEST(ProgressBar, At80ColumnsItFitsOnOneLine) {
  const std::string line = progress_bar_line(state(), 80);
  EXPECT_LE(line.size(), 79u) << line;
  EXPECT_EQ(line,
            "Rank 0, epoch 1 [######.........] 120/300  loss 0.4321  1234 images/s  12s left");
}

// From wide to narrow: every line fits, the count is always there, and the fields go in order.
TEST(ProgressBar, ShortensThenDropsItsFieldsAsTheTerminalNarrows) {
  size_t last = std::string::npos;
  for (int columns = 200; columns >= 1; --columns) {
    const std::string line = progress_bar_line(state(), columns);
    SCOPED_TRACE(std::to_string(columns) + " columns: '" + line + "'");
    EXPECT_LE(line.size(), static_cast<size_t>(std::max(1, columns - 1)));
    EXPECT_LE(line.size(), last);
    last = line.size();
    if (columns >= 8) {
      EXPECT_NE(line.find("120/300"), std::string::npos);
    }
    const bool speed = line.find("1234") != std::string::npos;
    const bool left = line.find("12s") != std::string::npos;
    const bool loss = line.find("loss") != std::string::npos;
    const bool bar = line.find('[') != std::string::npos;
    EXPECT_TRUE(!speed || left) << "images/s goes first";
    EXPECT_TRUE(!left || loss) << "then the time left";
    EXPECT_TRUE(!loss || bar) << "then the loss, then the bar";
    if (bar) {
      const size_t width = line.find(']') - line.find('[') - 1;
      EXPECT_GE(width, 10u);
      EXPECT_LE(width, 30u);
    }
  }
  EXPECT_EQ(progress_bar_line(state(), 60),
            "epoch 1 [#####.........] 120/300 loss 0.4321 1234 img/s 12s");
  EXPECT_EQ(progress_bar_line(state(), 41), "epoch 1 [####......] 120/300 loss 0.4321");
  EXPECT_EQ(progress_bar_line(state(), 40), "epoch 1 [########.............] 120/300");
  EXPECT_EQ(progress_bar_line(state(), 20), "epoch 1 120/300");
  EXPECT_EQ(progress_bar_line(state(), 5), "120/");
}

TEST(ProgressBar, TheCountIsAsWideAsItsEndSoTheBarKeepsItsWidth) {
  const std::string early = progress_bar_line(state(5, 300), 80);
  EXPECT_EQ(early.size(), progress_bar_line(state(120, 300), 80).size());
  EXPECT_NE(early.find("]   5/300  loss"), std::string::npos) << early;
}

TEST(ProgressPlain, OneLineAnUpdateCountingToTheEnd) {
  EXPECT_EQ(progress_plain_line(state(100, 150)),
            "Rank 0, epoch 1, batch 100/150: loss 0.4321, 1234 images/s, 12s left");
}

TEST(TerminalColumns, ColumnsThenEighty) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);  // a pipe has no window size
  EXPECT_EQ(terminal_columns(fds[1], "132"), 132);
  EXPECT_EQ(terminal_columns(fds[1], nullptr), 80);
  for (const char* bad : {"", "0", "-5", "abc", "80x"})
    EXPECT_EQ(terminal_columns(fds[1], bad), 80);
  close(fds[0]);
  close(fds[1]);
}

}  // namespace
