// apps/train/report.cpp: progress, epoch lines and metrics.
#include "apps/train/report.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "io/json.h"

namespace engine::apps {

using Clock = std::chrono::steady_clock;

Progress::Progress(int rank, bool enabled)
    : rank_(rank), enabled_(enabled), tty_(isatty(STDOUT_FILENO) == 1) {}

void Progress::start_epoch(int64_t epoch, int64_t batches, int64_t first_batch) {
  epoch_ = epoch;
  batches_ = batches;
  first_ = first_batch;
  images_ = 0;
  t0_ = last_ = Clock::now();
}

void Progress::update(int64_t batch, double loss, int64_t images) {
  if (!enabled_) return;
  images_ += images;
  auto now = Clock::now();
  bool last = batch + 1 == batches_;
  if (tty_) {
    if (!last && now - last_ < std::chrono::milliseconds(200)) return;
  } else if ((batch + 1) % 100 != 0 && !last) {
    return;
  }
  last_ = now;
  double s = std::chrono::duration<double>(now - t0_).count();
  double done = static_cast<double>(batch + 1 - first_);
  double ips = s > 0 ? images_ / s : 0;
  double left = done > 0 ? s / done * static_cast<double>(batches_ - batch - 1) : 0;
  if (tty_) {
    int width = 30, filled = static_cast<int>(width * (batch + 1) / std::max<int64_t>(1, batches_));
    std::string bar(filled, '#');
    bar.resize(width, '.');
    std::printf("\rRank %d, epoch %lld [%s] %lld/%lld  loss %.4f  %.0f images/s  %.0fs left ",
                rank_, static_cast<long long>(epoch_), bar.c_str(),
                static_cast<long long>(batch + 1), static_cast<long long>(batches_), loss, ips,
                left);
  } else {
    std::printf("Rank %d, epoch %lld, batch %lld/%lld: loss %.4f, %.0f images/s, %.0fs left\n",
                rank_, static_cast<long long>(epoch_), static_cast<long long>(batch + 1),
                static_cast<long long>(batches_), loss, ips, left);
  }
  std::fflush(stdout);
}

void Progress::finish() {
  if (enabled_ && tty_) std::printf("\n");
}

void print_epoch(int rank, const EpochResult& r) {
  std::printf("Rank %d, epoch %lld: %.6f\n", rank, static_cast<long long>(r.epoch), r.train_loss);
  print_test_line(r);
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
  const Json j = {{"epoch", r.epoch},           {"step", r.step},
                  {"train_loss", r.train_loss}, {"test_loss", r.test_loss},
                  {"test_acc", r.test_acc},     {"images_per_s", r.images_per_s},
                  {"wall_s", r.wall_s},         {"train_flop_per_image", r.train_flop_per_image},
                  {"precision", r.precision}};
  std::string line = dump_json(j) + "\n";
  ENGINE_CHECK(std::fwrite(line.data(), 1, line.size(), f_) == line.size() && std::fflush(f_) == 0,
               path_, ": write failed: ", std::strerror(errno));
}

}  // namespace engine::apps
