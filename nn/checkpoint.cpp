// nn/checkpoint.cpp: between Modules/Optimizers and safetensors files.
#include "nn/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <utility>

#include "core/autograd.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "nn/checkpoint_check.h"

namespace engine::nn {
namespace {

constexpr const char* kOptPrefix = "optimizer.";
constexpr const char* kCommPrefix = "comm.";

StEntry to_entry(const std::string& name, const Tensor& t) {
  Tensor c = t.to(Device::cpu());
  StEntry e{name, c.dtype(), c.shape(), {}};
  e.bytes.assign(static_cast<const char*>(c.raw_data()), c.nbytes());
  return e;
}

void from_entry(const StEntry& e, Tensor& t, const std::string& path) {
  ENGINE_CHECK(e.dtype == t.dtype(), path, ": '", e.name, "' is ", dtype_name(e.dtype),
               ", the model expects ", dtype_name(t.dtype()));
  ENGINE_CHECK(e.shape == t.shape(), path, ": '", e.name, "' has shape ", shape_str(e.shape),
               ", the model expects ", shape_str(t.shape()));
  Tensor host = Tensor::empty(t.shape(), t.dtype());
  if (!e.bytes.empty()) std::memcpy(host.raw_data(), e.bytes.data(), e.bytes.size());
  t.copy_from(host);
}

std::vector<StEntry> model_entries(const Module& m) {
  std::vector<StEntry> out;
  for (auto& [n, t] : m.state_dict()) out.push_back(to_entry(n, t));
  return out;
}

// Loads the model's keys from f; `allowed_prefix` (and `also`) name extra keys that are not the
// model's.
void load_model_entries(const StFile& f, Module& m, const std::string& path,
                        const std::string& allowed_prefix, const std::string& also = "") {
  std::set<std::string> wanted;
  for (auto& [n, t] : m.state_dict()) {
    const StEntry* e = f.find(n);
    ENGINE_CHECK(e, path, ": missing '", n, "' (the model has it, the file does not)");
    from_entry(*e, t, path);
    wanted.insert(n);
  }
  for (const StEntry& e : f.entries) {
    if (wanted.count(e.name)) continue;
    if (!allowed_prefix.empty() && e.name.rfind(allowed_prefix, 0) == 0) continue;
    if (!also.empty() && e.name.rfind(also, 0) == 0) continue;
    ENGINE_FAIL(path, ": unexpected '", e.name, "' (the file has it, the model does not)");
  }
}

uint64_t meta_u64(const StFile& f, const std::string& key, const std::string& path) {
  return checkpoint_meta_uint(f, key, path);
}

// The optimizer's state in f (the keys under kOptPrefix, without it).
NamedTensors optimizer_entries(const StFile& f, const std::string& path) {
  NamedTensors state;
  for (const StEntry& e : f.entries) {
    if (e.name.rfind(kOptPrefix, 0) != 0) continue;
    ENGINE_CHECK(e.dtype == DType::F32, path, ": optimizer state '", e.name, "' is ",
                 dtype_name(e.dtype));
    Tensor t = Tensor::empty(e.shape);
    if (!e.bytes.empty()) std::memcpy(t.raw_data(), e.bytes.data(), e.bytes.size());
    state.emplace_back(e.name.substr(std::strlen(kOptPrefix)), t);
  }
  return state;
}

// The metadata key of DataParallel replica i's dropout offset (i >= 1).
std::string replica_offset_key(size_t i) {
  return "dp_dropout_offset_" + std::to_string(i);
}

// Doubles as exact text: C's hexadecimal floats ("0x1.8p+1"), comma-separated.
std::string doubles_text(const std::vector<double>& v) {
  std::string out;
  char buf[64];
  for (double d : v) {
    std::snprintf(buf, sizeof buf, "%a", d);
    out += (out.empty() ? "" : ",") + std::string(buf);
  }
  return out;
}

std::vector<double> parse_doubles(const std::string& text, const std::string& key,
                                  const std::string& path) {
  std::vector<double> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    char* end = nullptr;
    const double d = std::strtod(item.c_str(), &end);
    ENGINE_CHECK(!item.empty() && end == item.c_str() + item.size(), path, ": metadata '", key,
                 "' holds '", item, "', not a number");
    out.push_back(d);
    at = comma + 1;
  }
  return out;
}

}  // namespace

void save_state_dict(const std::string& path, const Module& m,
                     const std::map<std::string, std::string>& metadata) {
  std::map<std::string, std::string> meta = metadata;
  meta.emplace("format", "pt");
  save_safetensors(path, model_entries(m), meta);
}

void load_state_dict(const std::string& path, Module& m) {
  NoGradGuard ng;
  load_model_entries(load_safetensors(path), m, path, "");
}

std::string encode_training_checkpoint(const Module& m, const Optimizer& opt,
                                       const TrainPosition& pos) {
  std::vector<StEntry> entries = model_entries(m);
  for (auto& [n, t] : opt.state()) entries.push_back(to_entry(kOptPrefix + n, t));
  for (auto& [n, t] : pos.comm_state) entries.push_back(to_entry(kCommPrefix + n, t));
  std::map<std::string, std::string> meta;
  meta["format"] = "pt";
  meta["engine.checkpoint"] = "train-v1";
  meta["engine.epoch"] = std::to_string(pos.epoch);
  meta["engine.batch_in_epoch"] = std::to_string(pos.batch_in_epoch);
  meta["engine.step"] = std::to_string(pos.step);
  meta["engine.optimizer_steps"] = std::to_string(opt.steps());
  meta["engine.init_seed"] = std::to_string(pos.init_seed);
  meta["engine.dropout_seed"] = std::to_string(pos.dropout_seed);
  meta["engine.dropout_offset"] = std::to_string(pos.dropout_offset);
  for (size_t i = 0; i < pos.replica_dropout_offsets.size(); ++i)
    meta[replica_offset_key(i + 1)] = std::to_string(pos.replica_dropout_offsets[i]);
  if (!pos.model.empty()) meta["model"] = pos.model;
  if (!pos.epoch_loss_sums.empty())
    meta["engine.epoch_loss_sums"] = doubles_text(pos.epoch_loss_sums);
  if (pos.world_size > 0) meta["engine.world_size"] = std::to_string(pos.world_size);
  if (pos.batch_size > 0) meta["engine.batch_size"] = std::to_string(pos.batch_size);
  meta["engine.world_invariant"] = pos.world_invariant ? "1" : "0";
  return encode_safetensors(entries, meta);
}

void save_training_checkpoint(const std::string& path, const Module& m, const Optimizer& opt,
                              const TrainPosition& pos) {
  write_file_atomic(path, encode_training_checkpoint(m, opt, pos));
}

TrainPosition load_training_checkpoint(const std::string& path, Module& m, Optimizer& opt) {
  return decode_training_checkpoint(read_file(path), m, opt, path);
}

TrainPosition decode_training_checkpoint(std::string_view bytes, Module& m, Optimizer& opt,
                                         const std::string& path) {
  NoGradGuard ng;
  StFile f = decode_safetensors(bytes, path);
  check_training_checkpoint(f, path, m, opt);
  TrainPosition pos;
  pos.epoch = static_cast<int64_t>(meta_u64(f, "engine.epoch", path));
  pos.batch_in_epoch = static_cast<int64_t>(meta_u64(f, "engine.batch_in_epoch", path));
  pos.step = static_cast<int64_t>(meta_u64(f, "engine.step", path));
  pos.init_seed = meta_u64(f, "engine.init_seed", path);
  pos.dropout_seed = meta_u64(f, "engine.dropout_seed", path);
  pos.dropout_offset = meta_u64(f, "engine.dropout_offset", path);
  for (size_t i = 1; f.metadata.count(replica_offset_key(i)); ++i)
    pos.replica_dropout_offsets.push_back(meta_u64(f, replica_offset_key(i), path));
  if (auto it = f.metadata.find("model"); it != f.metadata.end()) pos.model = it->second;
  if (auto it = f.metadata.find("engine.epoch_loss_sums"); it != f.metadata.end())
    pos.epoch_loss_sums = parse_doubles(it->second, it->first, path);
  for (auto [key, field] : {std::pair{"engine.world_size", &pos.world_size},
                            std::pair{"engine.batch_size", &pos.batch_size}})
    if (f.metadata.count(key)) *field = static_cast<int64_t>(meta_u64(f, key, path));
  pos.world_invariant =
      f.metadata.count("engine.world_invariant") && meta_u64(f, "engine.world_invariant", path);
  int64_t opt_steps = static_cast<int64_t>(meta_u64(f, "engine.optimizer_steps", path));
  load_model_entries(f, m, path, kOptPrefix, kCommPrefix);
  for (const StEntry& e : f.entries) {
    if (e.name.rfind(kCommPrefix, 0) != 0 || e.dtype != DType::F32) continue;
    Tensor t = Tensor::empty(e.shape);
    if (!e.bytes.empty()) std::memcpy(t.raw_data(), e.bytes.data(), e.bytes.size());
    pos.comm_state.emplace_back(e.name.substr(std::strlen(kCommPrefix)), t);
  }
  opt.load_state(optimizer_entries(f, path), opt_steps);
  return pos;
}

}  // namespace engine::nn
