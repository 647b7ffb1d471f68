// nn/checkpoint_check.cpp: see checkpoint_check.h.
#include "nn/checkpoint_check.h"

#include <algorithm>
#include <map>
#include <vector>

#include "core/error.h"

namespace engine::nn {
namespace {

constexpr const char* kOptPrefix = "optimizer.";
constexpr const char* kReplicaPrefix = "dp_dropout_offset_";
constexpr uint64_t kMaxInt64 = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

bool starts_with(const std::string& s, const std::string& p) {
  return s.rfind(p, 0) == 0;
}
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

// Digits only, at most max; false otherwise.
bool parse_uint(const std::string& s, uint64_t max, uint64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (d > max || v > (max - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

// Positions, counters, seeds and the DataParallel offsets: numbers in range, offsets 1..N.
void check_numbers(const StFile& f, const std::string& path) {
  for (const char* k :
       {"engine.epoch", "engine.batch_in_epoch", "engine.step", "engine.optimizer_steps"})
    checkpoint_meta_uint(f, k, path, kMaxInt64);
  for (const char* k : {"engine.init_seed", "engine.dropout_seed", "engine.dropout_offset"})
    checkpoint_meta_uint(f, k, path);
  for (const char* k : {"engine.world_size", "engine.batch_size"})
    ENGINE_CHECK(!f.metadata.count(k) || checkpoint_meta_uint(f, k, path, kMaxInt64) > 0, path,
                 ": metadata '", k, "' is 0 (a run has a rank and an image per step at least)");
  if (f.metadata.count("engine.world_invariant"))
    checkpoint_meta_uint(f, "engine.world_invariant", path, 1);
  size_t replicas = 0;
  while (f.metadata.count(kReplicaPrefix + std::to_string(replicas + 1)))
    checkpoint_meta_uint(f, kReplicaPrefix + std::to_string(++replicas), path);
  for (const auto& [key, value] : f.metadata) {
    if (!starts_with(key, kReplicaPrefix)) continue;
    uint64_t i = 0;
    ENGINE_CHECK(parse_uint(key.substr(std::string(kReplicaPrefix).size()), replicas, &i) && i > 0,
                 path, ": metadata '", key, "': DataParallel replica offsets are numbered 1 .. N ",
                 "without gaps, and this file has ", replicas, " in a row");
  }
}

// Every tensor of the model is in the file; a file of another model says which.
void check_model(const StFile& f, const std::string& path, const Module& m) {
  const auto named = f.metadata.find("model");
  for (auto& [n, t] : m.state_dict()) {
    if (f.find(n)) continue;
    if (named != f.metadata.end())
      ENGINE_FAIL(path, ": field 'model' is '", named->second, "' and the file lacks '", n,
                  "' of this run's model: a checkpoint of another model");
    ENGINE_FAIL(path, ": missing '", n, "' (the model has it, the file does not)");
  }
}

// The suffixes of the state tensors opt keeps per parameter.
std::vector<std::string> state_suffixes(const Optimizer& opt) {
  if (const auto* sgd = dynamic_cast<const SGD*>(&opt))
    return sgd->config().momentum != 0 ? std::vector<std::string>{".momentum_buffer"}
                                       : std::vector<std::string>{};
  return {".exp_avg", ".exp_avg_sq"};
}

// The optimizer kind the file's state names imply ("" when it has no state), and that state.
std::string file_kind(const StFile& f, std::string* field) {
  for (const StEntry& e : f.entries) {
    if (!starts_with(e.name, kOptPrefix)) continue;
    *field = e.name;
    if (ends_with(e.name, ".momentum_buffer")) return "sgd";
    if (ends_with(e.name, ".exp_avg") || ends_with(e.name, ".exp_avg_sq")) return "adam";
  }
  return "";
}

void check_optimizer(const StFile& f, const std::string& path, const Optimizer& opt) {
  const std::string run = optimizer_kind(opt);
  std::string field;
  const std::string kind = file_kind(f, &field);
  if (!kind.empty() && kind != run)
    throw ResumeMismatch(ResumeMismatch::Setting::Optimizer,
                         detail::concat(path, ": optimizer state '", field, "' is ", kind,
                                        "'s: an ", kind, " checkpoint cannot resume with "),
                         "the optimizer",
                         detail::concat(" ", run, " (its state would be dropped or made up)"));
  std::map<std::string, const Tensor*> wanted;
  for (const auto& [name, p] : opt.params())
    for (const std::string& suffix : state_suffixes(opt)) wanted[kOptPrefix + name + suffix] = &p;
  for (const StEntry& e : f.entries) {
    if (!starts_with(e.name, kOptPrefix)) continue;
    auto it = wanted.find(e.name);
    ENGINE_CHECK(it != wanted.end(), path, ": optimizer state '", e.name, "' is not one ", run,
                 wanted.empty() ? " without momentum" : "", " keeps for this model");
    ENGINE_CHECK(e.shape == it->second->shape(), path, ": optimizer state '", e.name,
                 "' has shape ", shape_str(e.shape), ", its parameter has ",
                 shape_str(it->second->shape()));
  }
  const uint64_t steps = checkpoint_meta_uint(f, "engine.optimizer_steps", path, kMaxInt64);
  for (const auto& [name, p] : wanted)
    ENGINE_CHECK(steps == 0 || f.find(name), path, ": optimizer state '", name,
                 "' is missing after ", steps, " optimizer steps (engine.optimizer_steps)");
}

// The first entry of one rank's own communication state ("<name>.rank<r>") that holds anything
// (PowerSGD's error feedback, zeros until compression starts); "" when there is none. Another
// world size has no rank to hand it to, or ranks that would start without theirs.
std::string rank_state(const TrainPosition& p) {
  for (const auto& [name, t] : p.comm_state) {
    const size_t at = name.rfind(".rank");
    if (at == std::string::npos || at + 5 == name.size() ||
        name.find_first_not_of("0123456789", at + 5) != std::string::npos)
      continue;
    const Tensor h = t.to(Device::cpu());
    const float* v = h.data<float>();
    if (std::any_of(v, v + h.numel(), [](float x) { return x != 0; })) return name;
  }
  return "";
}

// The writer's world size, batch size and mode against this run's (check_resume_position).
void check_world(const std::string& path, const TrainPosition& p, const ResumeRun& run) {
  using S = ResumeMismatch::Setting;
  if (run.world_size == 0) return;  // evaluates the weights: no position to go on from
  const bool mid = p.batch_in_epoch > 0;
  ENGINE_CHECK(!mid || p.world_invariant == run.world_invariant, path,
               ": field 'engine.world_invariant' is ", p.world_invariant ? 1 : 0, " and this run ",
               run.world_invariant ? "is" : "is not", " in the world-invariant mode: mid-epoch ",
               "(engine.batch_in_epoch ", p.batch_in_epoch,
               ") a position in one mode's data order is none in the other's");
  if (p.world_size > 0 && p.world_size != run.world_size) {
    std::string why;
    // World-invariant: batch_in_epoch counts global batches of one order, the same at any size.
    if (mid && !run.world_invariant)
      why = detail::concat(": the checkpoint stops mid-epoch (engine.batch_in_epoch ",
                           p.batch_in_epoch, " counts steps over the shards of ", p.world_size,
                           " ranks), where another world size cannot go on (resume it at ",
                           p.world_size, " ranks, or from a checkpoint at an epoch's end)");
    else if (const std::string state = rank_state(p); !state.empty())
      why = detail::concat(" and the file holds one rank's state 'comm.", state,
                           "', which another world size cannot share out (resume it at ",
                           p.world_size, " ranks)");
    if (!why.empty())
      throw ResumeMismatch(
          S::WorldSize,
          detail::concat(path, ": field 'engine.world_size' is ", p.world_size, ", this run's "),
          "world size", detail::concat(" is ", run.world_size, why));
  }
  if (mid && p.batch_size > 0 && p.batch_size != run.batch_size)
    throw ResumeMismatch(
        S::BatchSize,
        detail::concat(path, ": field 'engine.batch_size' is ", p.batch_size, ", this run's "),
        "batch size",
        detail::concat(" is ", run.batch_size,
                       ": the checkpoint stops mid-epoch (engine.batch_in_epoch ", p.batch_in_epoch,
                       " counts steps of ", p.batch_size,
                       " images), where another batch size cannot go on (resume it with ",
                       p.batch_size, ", or from a checkpoint at an epoch's end)"));
}

}  // namespace

const char* optimizer_kind(const Optimizer& opt) {
  return dynamic_cast<const SGD*>(&opt) ? "sgd" : "adam";
}

uint64_t checkpoint_meta_uint(const StFile& f, const std::string& key, const std::string& path,
                              uint64_t max) {
  auto it = f.metadata.find(key);
  ENGINE_CHECK(it != f.metadata.end(), path, ": not a training checkpoint (no '", key,
               "' in its metadata)");
  uint64_t v = 0;
  ENGINE_CHECK(parse_uint(it->second, max, &v), path, ": metadata '", key, "' is '", it->second,
               "', not an integer 0 .. ", max);
  return v;
}

void check_training_checkpoint(const StFile& f, const std::string& path, const Module& m,
                               const Optimizer& opt) {
  check_numbers(f, path);
  check_model(f, path, m);
  check_optimizer(f, path, opt);
}

void check_resume_position(const std::string& path, const TrainPosition& p, const ResumeRun& run) {
  using S = ResumeMismatch::Setting;
  if (!p.model.empty() && p.model != run.model)
    throw ResumeMismatch(
        S::Model, detail::concat(path, ": field 'model' is '", p.model, "', this run trains "),
        "the model", " " + run.model);
  if (p.init_seed != static_cast<uint64_t>(run.seed))
    throw ResumeMismatch(
        S::Seed,
        detail::concat(path, ": field 'engine.init_seed' is ", p.init_seed, ", this run's "),
        "seed",
        detail::concat(" is ", run.seed, " (a resumed run continues its checkpoint's seed)"));
  if (!(p.epoch < run.epochs || (p.epoch == run.epochs && p.batch_in_epoch == 0)))
    throw ResumeMismatch(S::Epochs,
                         detail::concat(path, ": field 'engine.epoch' is ", p.epoch, ", past the ",
                                        run.epochs, " epoch(s) of "),
                         "the run's epoch count", detail::concat(" ", run.epochs));
  check_world(path, p, run);
  ENGINE_CHECK(p.batch_in_epoch == 0 || p.batch_in_epoch < run.batches_per_epoch, path,
               ": field 'engine.batch_in_epoch' is ", p.batch_in_epoch,
               ", past the end of an epoch of this run (", run.batches_per_epoch,
               " batches per rank)");
  ENGINE_CHECK(p.step == run.optimizer_steps, path, ": field 'engine.step' is ", p.step,
               " but 'engine.optimizer_steps' is ", run.optimizer_steps,
               " (every step is one optimizer step)");
  if (p.replica_dropout_offsets.empty() || p.replica_dropout_offsets.size() == run.dp_replicas)
    return;
  const std::string held = detail::concat(
      path, ": fields 'dp_dropout_offset_<i>' hold ", p.replica_dropout_offsets.size(),
      " DataParallel replica(s), this run has ", run.dp_replicas);
  ENGINE_CHECK(run.dp_replicas == 0, held);
  throw ResumeMismatch(S::OneProcessPerRank, held + " (", "one process per rank", ")");
}

}  // namespace engine::nn
