// report/train_report.cpp: progress, epoch lines and metrics.
#include "report/train_report.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "io/json.h"
#include "report/progress.h"

namespace engine::report {

using Clock = std::chrono::steady_clock;

Progress::Progress(int rank, bool enabled)
    : rank_(rank), enabled_(enabled), tty_(isatty(STDOUT_FILENO) == 1) {}

void Progress::start_epoch(int64_t epoch, int64_t first_batch, int64_t end) {
  epoch_ = epoch;
  first_ = first_batch;
  end_ = end;
  images_ = 0;
  shown_ = 0;
  t0_ = last_ = Clock::now();
}

void Progress::update(int64_t batch, const std::function<double()>& loss, int64_t images) {
  if (!enabled_) return;
  images_ += images;
  auto now = Clock::now();
  bool last = batch + 1 >= end_;
  if (tty_) {
    if (!last && now - last_ < std::chrono::milliseconds(200)) return;
  } else if ((batch + 1) % 100 != 0 && !last) {
    return;
  }
  last_ = now;
  const double s = std::chrono::duration<double>(now - t0_).count();
  const double done = static_cast<double>(batch + 1 - first_);
  ProgressState p;
  p.rank = rank_;
  p.epoch = epoch_;
  p.done = batch + 1;
  p.end = end_;
  p.loss = loss();  // read only for a line shown
  p.images_per_s = s > 0 ? images_ / s : 0;
  p.seconds_left = done > 0 ? s / done * static_cast<double>(end_ - batch - 1) : 0;
  if (tty_) {
    // The width is asked at every update: the terminal may have been resized.
    const int columns = terminal_columns(STDOUT_FILENO, std::getenv("COLUMNS"));
    std::string line = progress_bar_line(p, columns);
    const size_t len = line.size(), room = static_cast<size_t>(std::max(1, columns - 1));
    if (len < shown_) line.append(std::min(shown_, room) - len, ' ');  // over a longer last line
    shown_ = len;
    std::printf("\r%s", line.c_str());
  } else {
    std::printf("%s\n", progress_plain_line(p).c_str());
  }
  std::fflush(stdout);
}

// Ends the bar's line; nothing when no bar was shown (an empty line under mpirun, whose ranks
// write to a terminal, when the epoch ended before the first update).
void Progress::finish() {
  if (enabled_ && tty_ && shown_ > 0) std::printf("\n");
}

void print_epoch(int rank, const EpochResult& r) {
  std::printf("Rank %d, epoch %lld: %.6f", rank, static_cast<long long>(r.epoch), r.train_loss);
  if (r.skipped_steps > 0)  // non-finite steps skipped; the line is the tutorial's otherwise
    std::printf(" (%lld steps skipped: non-finite gradients)",
                static_cast<long long>(r.skipped_steps));
  std::printf("\n");
  print_test_line(r);
}

void print_regroup(const Regroup& g) {
  const int world = static_cast<int>(g.ids.size());
  const std::string at = g.step < 0 ? "before the first step" : "at step " + std::to_string(g.step);
  for (size_t i = 0; i < g.lost.size(); ++i)
    std::printf("rank %d lost %s (%s): continuing with %d rank%s\n", g.lost[i], at.c_str(),
                g.reasons[i].c_str(), world, world == 1 ? "" : "s");
  for (int id : g.joined)
    std::printf(
        "rank %d re-admitted at step %lld from rank %d's state (%.1f MB in %.0f ms): %d "
        "rank%s\n",
        id, static_cast<long long>(g.step), g.source, g.bytes / 1e6, g.ms, world,
        world == 1 ? "" : "s");
  std::string ids;
  for (size_t i = 0; i < g.ids.size(); ++i) {
    if (i) ids += ", ";
    ids += std::to_string(g.ids[i]);
  }
  if (g.step < 0)
    std::printf("Ranks %s start as ranks 0 .. %d (nothing to hand over yet)\n", ids.c_str(),
                world - 1);
  else
    std::printf(
        "Ranks %s go on as ranks 0 .. %d from rank %d's state at step %lld (%.1f MB in %.0f "
        "ms)\n",
        ids.c_str(), world - 1, g.source, static_cast<long long>(g.step), g.bytes / 1e6, g.ms);
  std::fflush(stdout);
}

void print_test_line(const EpochResult& r) {
  std::printf("Test set: average loss %.4f, accuracy %lld/%lld (%.2f%%)\n", r.test_loss,
              static_cast<long long>(r.test_correct), static_cast<long long>(r.test_count),
              100.0 * r.test_acc);
  std::fflush(stdout);
}

MetricsWriter::MetricsWriter(const std::string& path, bool append) : path_(path) {
  f_ = std::fopen(path.c_str(), append ? "a" : "w");
  ENGINE_CHECK(f_, path, ": cannot open for writing: ", std::strerror(errno));
}

MetricsWriter::~MetricsWriter() {
  if (f_) std::fclose(f_);
}

void MetricsWriter::write(const EpochResult& r) {
  Json j = {{"epoch", r.epoch},
            {"step", r.step},
            {"train_loss", r.train_loss},
            {"test_loss", r.test_loss},
            {"test_acc", r.test_acc},
            {"images_per_s", r.images_per_s},
            {"wall_s", r.wall_s},
            {"train_flop_per_image", r.train_flop_per_image},
            {"precision", r.precision},
            {"optimizer_state_bytes", r.optimizer_state_bytes},
            {"comm_bytes_per_step", r.comm_bytes_per_step},
            {"skipped_steps", r.skipped_steps},
            {"world_size", r.world_size},
            {"generation", r.generation},
            {"world_size_changes", r.world_size_changes},
            {"steps_lost", r.steps_lost}};
  j["straggler_rank"] = r.straggler_rank >= 0 ? Json(r.straggler_rank) : Json(nullptr);
  j["straggler_share"] = r.straggler_share;
  j["straggler_late_ms"] = r.straggler_late_ms;
  j["wait_ms_per_step"] = r.wait_ms_per_step;
  std::string line = dump_json(j) + "\n";
  ENGINE_CHECK(std::fwrite(line.data(), 1, line.size(), f_) == line.size() && std::fflush(f_) == 0,
               path_, ": write failed: ", std::strerror(errno));
}

}  // namespace engine::report
