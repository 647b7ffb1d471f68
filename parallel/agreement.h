// parallel/agreement.h: the ranks of a job agree on every setting that changes the math or the
// data, or all refuse to start: each rank's settings (the app's list of what it was told) and a
// fingerprint of its dataset are gathered by every rank and compared, so every rank finds the
// same first difference and throws the same message.
#pragma once
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "data/mnist.h"

namespace engine::parallel {

// One thing the ranks must agree on: its name as the message prints it ("the learning rate", "the
// data: train-images-idx3-ubyte") and its value as text ("0.01").
struct Setting {
  std::string name, value;
};

// One setting per file of the dataset: the counts and dimensions from its header and a hash of
// every byte it holds once decoded (a .gz and a raw copy of the same file agree).
std::vector<Setting> data_settings(const data::Mnist& m);

// Every rank gathers every rank's settings (within the communicator's timeout) and throws
// engine::Error at the first that differs, in the order given:
//   "ranks disagree on the learning rate: 0.01 on rank 0, 0.5 on rank 1"
// (rank 0's value and that of the lowest rank whose value differs). Every rank throws the same.
void agree(comm::Communicator& comm, const std::vector<Setting>& mine);

// The first difference between the ranks' settings (all[r]: rank r's), as agree() words it;
// "" when they all agree.
std::string first_disagreement(const std::vector<std::vector<Setting>>& all);

}  // namespace engine::parallel
