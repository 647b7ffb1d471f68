// apps/train/options.cpp: see options.h.
#include "apps/train/options.h"

#include <algorithm>

#include "core/error.h"

namespace engine::apps {

parallel::OptimizerOptions optimizer_options(const TrainConfig& c) {
  parallel::OptimizerOptions o;
  o.kind = c.optimizer == "adam" ? parallel::OptimizerKind::Adam : parallel::OptimizerKind::Sgd;
  o.lr = c.lr;
  o.momentum = c.momentum;
  return o;
}

parallel::ReducerOptions reducer_options(const TrainConfig& c) {
  using K = parallel::ReducerKind;
  parallel::ReducerOptions r;
  r.bucket_bytes = static_cast<size_t>(c.bucket_mb * (1 << 20));
  r.powersgd_rank = static_cast<int>(powersgd_rank(c));
  r.powersgd_start = c.powersgd_start;
  r.seed = static_cast<uint64_t>(c.seed);
  r.tree_zero1 = c.world_invariant && c.zero == 1;
  if (c.world_invariant)
    r.kind = K::Tree;
  else if (r.powersgd_rank > 0)
    r.kind = K::PowerSgd;
  else if (c.grad_compression == "bf16" || c.grad_compression == "fp16")
    r.kind = c.grad_compression == "bf16" ? K::Bf16 : K::Fp16;
  else if (c.zero == 1)
    r.kind = K::Zero1;
  else
    r.kind = c.sync == "allreduce"          ? K::AllReduce
             : c.sync == "reduce-broadcast" ? K::ReduceBroadcast
                                            : K::Bucketed;
  return r;
}

parallel::NonfiniteMode nonfinite_mode(const TrainConfig& c) {
  using M = parallel::NonfiniteMode;
  return c.nonfinite == "skip" ? M::Skip : c.nonfinite == "off" ? M::Off : M::Stop;
}

parallel::AutoOnOff auto_on_off(const std::string& v) {
  ENGINE_CHECK(v == "auto" || v == "on" || v == "off", "must be auto, on or off, got '", v, "'");
  return v == "on"    ? parallel::AutoOnOff::On
         : v == "off" ? parallel::AutoOnOff::Off
                      : parallel::AutoOnOff::Auto;
}

parallel::CudaCollectiveOptions collective_options(const TrainConfig& c) {
  parallel::CudaCollectiveOptions o;
  o.backend = c.backend == "nccl"  ? parallel::CollectiveBackend::Nccl
              : c.backend == "mpi" ? parallel::CollectiveBackend::Mpi
                                   : parallel::CollectiveBackend::Ring;
  o.cuda_ring = c.cuda_ring == "ipc"      ? parallel::CudaRing::Ipc
                : c.cuda_ring == "staged" ? parallel::CudaRing::Staged
                                          : parallel::CudaRing::Auto;
  ENGINE_CHECK(comm::parse_ipc_protocol(c.cuda_ring_protocol, &o.protocol),
               "ENGINE_RING_PROTOCOL: no protocol '", c.cuda_ring_protocol, "'");
  o.channels = static_cast<int>(c.cuda_ring_channels);
  o.timeout_s = c.timeout_s;
  return o;
}

parallel::StepSettings step_settings(const TrainConfig& c, Device dev, int world,
                                     const std::string& collectives) {
  parallel::StepSettings s;
  s.cuda = dev.is_cuda();
  s.data_parallel = c.mode == "dp";
  s.world = world;
  s.collectives = collectives;
  s.nonfinite = nonfinite_mode(c);
  s.optimizer = optimizer_options(c).kind;
  s.reducer = reducer_options(c).kind;
  s.sync_bn = c.sync_bn;
  s.trace = !c.trace.empty();
  s.profile = c.profile;
  s.accumulate = c.accumulate;
  return s;
}

std::string graph_reason(const parallel::GraphChoice& g, const TrainConfig& c) {
  using B = parallel::GraphBlocker;
  const B b = g.blocker;
  if (b == B::Off) return "ENGINE_CUDA_GRAPH=off";
  if (b == B::HostCollectives) return g.why + "; --backend nccl is captured";
  if (b == B::Untried) return g.reason() + " (ENGINE_CUDA_GRAPH=on captures it)";
  std::string flag;  // the flag that names the setting, with its value
  if (b == B::DataParallel) flag = "--mode dp";
  if (b == B::Accumulate) flag = "--accumulate " + std::to_string(c.accumulate);
  if (b == B::NonfiniteSkip) flag = "--nonfinite skip";
  if (b == B::SyncBn) flag = "--sync-bn";
  if (b == B::Compression) flag = "--grad-compression " + c.grad_compression;
  if (b == B::Zero) flag = "--zero " + std::to_string(c.zero);
  if (b == B::Optimizer) flag = "--optimizer " + c.optimizer;
  if (b == B::Trace) flag = "--trace";
  if (b == B::Profile) flag = "--profile";
  return flag.empty() ? g.reason() : flag + ": " + g.why;
}

std::string collectives_refusal(const parallel::CollectivesRefused& e, int rank) {
  using W = parallel::CollectivesRefused::Why;
  switch (e.why) {
    case W::MixedDevices:
      return std::string(e.what()) + " (or pass --device cpu)";
    case W::NcclOnCpu:
      return "--backend nccl reduces CUDA tensors and this rank trains on the cpu (" + e.detail +
             "): use --backend ring";
    default:
      return "ENGINE_CUDA_RING=ipc on rank " + std::to_string(rank) + ": " + e.detail;
  }
}

std::string resume_refusal(const nn::ResumeMismatch& e) {
  static const char* const kFlag[] = {
      "--optimizer", "--model",    "--seed",
      "--epochs",    "--mode ddp", "world size (--world-size or the launcher's ranks)",
      "--batch-size"};
  return e.worded(kFlag[static_cast<int>(e.setting)]);  // in nn::ResumeMismatch::Setting's order
}

const std::vector<std::string>& rank_local_flags() {
  static const std::vector<std::string> kLocal = {
      "threads", "metrics",     "plot",       "profile",  "save",           "rank",
      "timeout", "init-method", "world-size", "data-dir", "flight-recorder"};
  return kLocal;
}

std::vector<parallel::Setting> config_settings(const TrainConfig& c) {
  TrainConfig copy = c;
  Flags f("");
  declare_train_flags(f, copy);
  const std::vector<std::string>& local = rank_local_flags();
  std::vector<parallel::Setting> out;
  for (const Flags::Value& v : f.values())
    if (std::find(local.begin(), local.end(), v.name) == local.end())
      out.push_back({"--" + v.name, v.value});
  // The ENGINE_* variables that change the numbers or the collectives' schedule (ENGINE_CUDA_GRAPH
  // and ENGINE_DATA_ON_DEVICE change neither: a replayed step and a gathered batch equal the eager
  // ones bit for bit).
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"ENGINE_ALGO", c.algo},
           {"ENGINE_CUDA_KERNELS", c.cuda_kernels},
           {"ENGINE_CUDA_RING", c.cuda_ring},
           {"ENGINE_RING_PROTOCOL", c.cuda_ring_protocol},
           {"ENGINE_RING_CHANNELS", std::to_string(c.cuda_ring_channels)},
           {"ENGINE_POWERSGD_START", std::to_string(c.powersgd_start)}})
    out.push_back({name, value});
  return out;
}

}  // namespace engine::apps
