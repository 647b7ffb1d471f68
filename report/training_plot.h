// report/training_plot.h: `train --plot FILE.svg`: a small SVG writer of our own that draws the
// loss of every step and the test accuracy after each epoch, readable in any browser or image
// viewer.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace engine::report {

// step_loss[i] is the training loss of step i+1 (non-finite values are skipped and counted).
// epoch_acc holds (step at the end of the epoch, test accuracy) pairs; accuracies all <= 1 are
// read as fractions, otherwise as percent. Two panels over one step axis: loss on top (each step,
// and a moving average when there are many), accuracy below (a point per epoch, labelled).
std::string training_plot_svg(const std::vector<double>& step_loss,
                              const std::vector<std::pair<int64_t, double>>& epoch_acc,
                              const std::string& title);

// The same, written to path atomically (a crash leaves the old file or none); throws
// engine::Error naming the path when it cannot write.
void write_training_plot(const std::string& path, const std::vector<double>& step_loss,
                         const std::vector<std::pair<int64_t, double>>& epoch_acc,
                         const std::string& title);

// Round tick values covering [lo, hi] with about `target` intervals (steps of 1, 2 or 5 x 10^k).
std::vector<double> nice_ticks(double lo, double hi, int target);

}  // namespace engine::report
