// report/progress.h: train's progress line within an epoch, as text: the bar that fits a
// terminal's width, the plain line for a pipe or a file, and where the count ends.
#pragma once
#include <cstdint>
#include <string>

namespace engine::report {

// What one update shows.
struct ProgressState {
  int rank = 0;
  int64_t epoch = 0;
  int64_t done = 0;  // batches of the epoch done, those of a resumed run's earlier part included
  int64_t end = 0;   // where this epoch's part of the run ends (progress_end)
  double loss = 0, images_per_s = 0, seconds_left = 0;
};

// The batch count at which the run stops within an epoch of `batches`: the epoch's end, or
// sooner under --steps: `first` batches of the epoch were trained before (a resumed run), and
// `steps_left` optimizer steps are left in the run (< 0: no limit).
int64_t progress_end(int64_t batches, int64_t first, int64_t steps_left);

// The bar for a terminal `columns` wide, at most columns - 1 characters (a line that fills the
// last column wraps on some terminals), e.g. at 80 columns:
//   Rank 0, epoch 1 [###.........] 120/300  loss 0.4321  1234 images/s  12s left
// The bar is 30 wide when there is room. On narrower terminals the bar shrinks (to 10), then the
// fields shorten ("img/s", no "Rank", single spaces, "12s"), then they go: images/s, the time
// left, the loss, the bar; last the count is cut to fit.
std::string progress_bar_line(const ProgressState& s, int columns);

// The line for a pipe or a file, one per update:
//   Rank 0, epoch 1, batch 100/469: loss 0.4321, 1234 images/s, 12s left
std::string progress_plain_line(const ProgressState& s);

// The width of the terminal on fd (ioctl TIOCGWINSZ); when that fails or says 0, columns_env (the
// COLUMNS variable; nullptr when unset) if it is a positive integer; else 80.
int terminal_columns(int fd, const char* columns_env);

}  // namespace engine::report
