// report/train_report.h: what train tells people (progress bar or plain lines, epoch lines) and
// scripts (JSON lines of metrics).
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace engine::report {

struct EpochResult {
  int64_t epoch = 0, step = 0;
  double train_loss = 0, test_loss = 0, test_acc = 0;
  int64_t test_correct = 0, test_count = 0;
  double images_per_s = 0, wall_s = 0;
  double train_flop_per_image = 0;    // forward + backward work per image (nn::FlopCount)
  std::string precision = "fp32";     // fp32 | bf16
  int64_t optimizer_state_bytes = 0;  // this rank's (ZeRO-1: its shard's)
  double comm_bytes_per_step = 0;     // gradient sync, per the ring schedule, mean of the epoch
  int64_t skipped_steps = 0;          // non-finite steps of the epoch skipped
  // --on-rank-loss continue: the membership's generation (0 until a rank is lost), the changes so
  // far, and completed steps trained again after one (0: the job goes on from the last step any
  // survivor completed).
  int64_t generation = 0, world_size_changes = 0, steps_lost = 0;
  int world_size = 1;  // ranks at the epoch's end
  // Who made everyone wait over the epoch (parallel/straggler.h): the rank that stood out (-1:
  // none; null in --metrics), its share of the collectives it came last in, how late, and each
  // rank's wait per step.
  int straggler_rank = -1;
  double straggler_share = 0, straggler_late_ms = 0;
  std::vector<double> wait_ms_per_step;
};

// Progress within an epoch: a carriage-return bar that fits the terminal's width on a terminal,
// a plain line every 100 batches otherwise (report/progress.h writes both).
class Progress {
 public:
  Progress(int rank, bool enabled);
  // Batches first .. end - 1 of the epoch are trained now (end: progress_end).
  void start_epoch(int64_t epoch, int64_t first_batch, int64_t end);
  // loss: called only when a line is shown (a host read of the device's losses).
  void update(int64_t batch, const std::function<double()>& loss, int64_t images);
  void finish();

 private:
  int rank_;
  bool enabled_, tty_;
  int64_t epoch_ = 0, first_ = 0, end_ = 0, images_ = 0;
  size_t shown_ = 0;  // characters of the bar on the terminal's line now
  std::chrono::steady_clock::time_point t0_, last_;
};

// Prints the tutorial's epoch line and the test result.
void print_epoch(int rank, const EpochResult& r);
// Prints the test result alone ("Test set: average loss L, accuracy C/N (P%)").
void print_test_line(const EpochResult& r);

// A membership change (train --on-rank-loss continue), one line per lost rank, as "rank 2 lost at
// step 41 (its process exited): continuing with 3 ranks", one per newcomer, as "rank 2 re-admitted
// at step 47 from rank 0's state (1.7 MB in 4 ms): 4 ranks", then who goes on from whose state.
// lost, reasons: ids (first ranks) of the lost members and why; ids: the members now, whose rank
// is their index; source: the id whose state (bytes, streamed in ms) every member took; step -1:
// lost before the first step ("rank 2 lost before the first step (...)"), nothing handed over.
struct Regroup {
  std::vector<int> lost, joined, ids;
  std::vector<std::string> reasons;
  int64_t step = 0;
  int source = 0;
  size_t bytes = 0;
  double ms = 0;
};
void print_regroup(const Regroup& g);

// Appends one JSON object per epoch to a file (created or truncated at open, appended on resume).
class MetricsWriter {
 public:
  MetricsWriter(const std::string& path, bool append);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  void write(const EpochResult& r);

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
};

}  // namespace engine::report
