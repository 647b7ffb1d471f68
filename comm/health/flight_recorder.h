// comm/health/flight_recorder.h: every rank's last collectives, kept in memory and written out
// when the job fails, is told to stop, or is asked (SIGUSR1): docs/flight_recorder.md, whose format
// to_json writes. Every Communicator records into the process's one recorder: the sequence number,
// fingerprint and times of each collective it starts, and how it ended. A fixed ring of
// kCapacity entries, taken under a mutex no other thread holds for long (a dump copies the ring
// first): a collective pays a lock and a few stores. ENGINE_FLIGHT_RECORDER=0 records nothing.
#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "comm/base/frame.h"

namespace engine::comm {

struct FlightEntry {
  enum class State : uint8_t { Started, Completed, Failed };
  uint32_t comm = 0;  // which communicator of the process (FlightRecorder::new_comm)
  Fingerprint call;
  double started_s = 0, completed_s = -1;  // seconds since the recorder's zero
  State state = State::Started;
  std::string error;             // Failed: its error
  std::vector<int> waiting_for;  // Failed: the ranks its error names gone, frozen or unreachable
};

class FlightRecorder {
 public:
  static constexpr size_t kCapacity = 2000;

  // The process's recorder (on unless ENGINE_FLIGHT_RECORDER=0).
  static FlightRecorder& get();
  explicit FlightRecorder(bool on);

  bool on() const { return on_; }
  // A number for a new communicator (its entries' `comm`).
  uint32_t new_comm();
  // Communicator `comm` entered `call` / the one it is in returned / failed with `error`.
  void started(uint32_t comm, const Fingerprint& call);
  void completed(uint32_t comm);
  // `self`: the failing rank, left out of the ranks its error names.
  void failed(uint32_t comm, const std::string& error, int self);

  // The entries, oldest first, and how many were recorded in all.
  std::vector<FlightEntry> snapshot(uint64_t* recorded = nullptr) const;
  // The dump (docs/flight_recorder.md) of this process as `rank` of `world`, written for `reason`.
  std::string to_json(int rank, int world, const std::string& reason) const;
  double now_s() const;

 private:
  const bool on_;
  const std::chrono::steady_clock::time_point zero_;
  const double zero_unix_s_;
  mutable std::mutex mu_;
  std::vector<FlightEntry> ring_;  // kCapacity slots, filled in turn
  uint64_t recorded_ = 0;
  uint32_t comms_ = 0;
  std::unordered_map<uint32_t, uint64_t> open_;  // comm -> its entry in flight (recorded index)
};

// --- dumps: train --flight-recorder DIR ------------------------------------------------------
// Where this process writes its dump (DIR is created), and as which rank of which world; later
// calls update the rank (a regrouped job).
void set_flight_dump(const std::string& dir, int rank, int world);
// Writes DIR/rank<N>.json now, atomically, for `reason`; false when no DIR is set or the write
// failed (then one line on stderr says why). Never throws: it runs on the way out of failures.
bool write_flight_dump(const std::string& reason);
// SIGUSR1 writes a dump while the process goes on; SIGTERM, SIGINT and SIGHUP write one and then
// end the process as the signal would have. A thread of its own writes them (no JSON in a signal
// handler). Once per process; after set_flight_dump.
void install_flight_signals();

}  // namespace engine::comm
