// apps/train/config.cpp: train's flags and their checks.
#include "apps/train/config.h"

#include "comm/backends/mpi/mpi_world.h"
#include "comm/rendezvous/rendezvous.h"
#include "core/knobs.h"
#include "nn/models.h"

namespace engine::apps {
namespace {

void declare_data_flags(Flags& f, TrainConfig& c) {
  f.section("Data and model");
  f.add_choice("model", &c.model, {"simplecnn", "convnet", "net", "linear"}, "model to train");
  f.add("data-dir", &c.data_dir, "folder with the MNIST-format IDX files (raw or .gz)");
  f.add("batch-size", &c.batch_size,
        "global batch size: each of W ranks takes int(B / W), as the tutorial's bsz");
  f.add_choice("shuffle", &c.shuffle, {"on", "off"},
               "reshuffle the shard every epoch; off: batches in shard order");
  f.add("dropout", &c.dropout, "override every dropout probability (< 0: model defaults)");
  f.add("seed", &c.seed, "seed of initialisation, sharding, shuffling and dropout");
}

void declare_optimisation_flags(Flags& f, TrainConfig& c) {
  f.section("Optimisation");
  f.add("epochs", &c.epochs, "epochs to train");
  f.add("steps", &c.steps, "stop after this many optimizer steps in all (0: no limit)");
  f.add("lr", &c.lr, "learning rate");
  f.add("momentum", &c.momentum, "SGD momentum");
  f.add_choice("optimizer", &c.optimizer, {"sgd", "adam"}, "optimizer");
  f.add_choice("precision", &c.precision, {"fp32", "bf16"},
               "bf16: convolutions and linear layers multiply bf16 operands with fp32 sums, as "
               "PyTorch's autocast; weights, optimizer, BatchNorm, softmax and loss stay fp32 "
               "(CPU: needs AVX512_BF16)");
  f.add_choice("nonfinite", &c.nonfinite, {"stop", "skip", "off"},
               "a loss or gradient that is inf or NaN: stop (every rank exits 1 naming the step "
               "and the parameter), skip (the optimizer step is skipped on every rank and "
               "counted), off (no check); stop and skip also refuse non-finite weights loaded or "
               "about to be saved");
}

void declare_checkpoint_flags(Flags& f, TrainConfig& c) {
  f.section("Checkpoints");
  f.add("init-from", &c.init_from, "load initial parameters and buffers (safetensors)");
  f.add("save", &c.save, "write the final parameters and buffers (safetensors)");
  f.add("checkpoint", &c.checkpoint,
        "write a training checkpoint (weights, optimizer, position, RNG) after every epoch "
        "(and every --checkpoint-every K steps)");
  f.add("checkpoint-every", &c.checkpoint_every,
        "also write --checkpoint every K optimizer steps (0: only after every epoch)");
  f.add("resume", &c.resume,
        "continue from a training checkpoint; auto: from --checkpoint when that file exists, "
        "else start fresh (one command line for the first start and every restart)");
  f.add_switch("eval-only", &c.eval_only,
               "evaluate the weights of --init-from or --resume on the test split; no training");
}

void declare_device_flags(Flags& f, TrainConfig& c) {
  f.section("Device");
  f.add_choice(
      "device", &c.device, {"auto", "cpu", "cuda"},
      "where to train; auto: cuda (rank r on cuda:LOCAL_RANK) when a GPU answers, else cpu");
  f.add("threads", &c.threads,
        "CPU threads for kernels (0: $ENGINE_THREADS, else $OMP_NUM_THREADS, else usable cores / "
        "ranks on this host)");
}

void declare_watching_flags(Flags& f, TrainConfig& c) {
  f.section("Watching");
  f.add("metrics", &c.metrics, "write one JSON line per epoch to this file");
  f.add("trace", &c.trace,
        "write a Chrome trace (Perfetto, chrome://tracing): one track per rank and thread");
  f.add("plot", &c.plot, "draw loss per step and test accuracy per epoch as an SVG");
  f.add_switch("profile", &c.profile,
               "after the run, print milliseconds per step by layer and phase, and GFLOP/s");
  f.add("flight-recorder", &c.flight_recorder,
        "write each rank's last 2,000 collectives to DIR/rank<N>.json when the job fails, is "
        "stopped (SIGTERM, SIGINT, SIGHUP) or gets SIGUSR1 (docs/flight_recorder.md)");
}

// The flags that became ENGINE_* variables (docs/knobs.md), and one that went with its code.
void retire_flags(Flags& f) {
  for (const auto& [flag, variable] : std::vector<std::pair<std::string, std::string>>{
           {"cuda-kernels", "ENGINE_CUDA_KERNELS=library|engine"},
           {"cuda-ring", "ENGINE_CUDA_RING=auto|staged|ipc"},
           {"cuda-ring-protocol", "ENGINE_RING_PROTOCOL=auto|ll|simple|events"},
           {"cuda-ring-channels", "ENGINE_RING_CHANNELS=0..32"},
           {"cuda-graph", "ENGINE_CUDA_GRAPH=on|off|auto"},
           {"data-on-device", "ENGINE_DATA_ON_DEVICE=on|off|auto"},
           {"algo", "ENGINE_ALGO=auto|ring|rd|rh|tree"},
           {"powersgd-start", "ENGINE_POWERSGD_START=0..1000000000"}})
    f.retire(flag, "--" + flag + " was removed: set " + variable + " instead (docs/knobs.md)");
  f.retire("staged-pipeline",
           "--staged-pipeline was removed with the staged ring's pipeline: the staged ring has "
           "one path, nothing to set");
}

}  // namespace

void declare_train_flags(Flags& f, TrainConfig& c) {
  declare_data_flags(f, c);
  declare_optimisation_flags(f, c);
  declare_checkpoint_flags(f, c);
  declare_distributed_flags(f, c);
  declare_device_flags(f, c);
  declare_watching_flags(f, c);
  retire_flags(f);
}

void read_knobs(TrainConfig& c) {
  knobs::check_all();
  c.algo = knobs::algo();
  c.cuda_kernels = knobs::cuda_kernels();
  c.cuda_ring = knobs::cuda_ring();
  c.cuda_ring_protocol = knobs::ring_protocol();
  c.cuda_ring_channels = knobs::ring_channels();
  c.powersgd_start = knobs::powersgd_start();
  c.cuda_graph = knobs::cuda_graph();
  c.data_on_device = knobs::data_on_device();
}

namespace {

constexpr double kMaxTimeoutS = 7 * 24 * 3600;  // a week: longer waits are mistakes
constexpr int64_t kMaxWorld = 1 << 16;

}  // namespace

void validate(const TrainConfig& c) {
  ENGINE_CHECK(c.epochs >= 1, "--epochs must be at least 1, got ", c.epochs);
  ENGINE_CHECK(c.steps >= 0, "--steps must be 0 or more, got ", c.steps);
  ENGINE_CHECK(c.batch_size >= 1, "--batch-size must be at least 1, got ", c.batch_size);
  ENGINE_CHECK(c.lr > 0, "--lr must be positive, got ", c.lr);
  ENGINE_CHECK(c.momentum >= 0 && c.momentum < 1, "--momentum must be in [0, 1), got ", c.momentum);
  check_range("--threads", c.threads, 0, kMaxThreads);
  ENGINE_CHECK(c.dropout <= 1, "--dropout must be at most 1, got ", c.dropout);
  ENGINE_CHECK(c.seed >= 0, "--seed must be 0 or more, got ", c.seed);
  ENGINE_CHECK(c.bucket_mb > 0, "--bucket-mb must be positive, got ", c.bucket_mb);
  ENGINE_CHECK(c.bucket_mb <= 1 << 20, "--bucket-mb must be at most 1048576, got ", c.bucket_mb);
  ENGINE_CHECK(c.timeout_s > 0 && c.timeout_s <= kMaxTimeoutS, "--timeout must be in (0, ",
               kMaxTimeoutS, "] seconds, got ", c.timeout_s);
  ENGINE_CHECK(c.world_size == -1 || (c.world_size >= 1 && c.world_size <= kMaxWorld),
               "--world-size must be -1 (from the environment) or 1 .. ", kMaxWorld, ", got ",
               c.world_size);
  ENGINE_CHECK(c.rank >= -1 && c.rank < (c.world_size > 0 ? c.world_size : kMaxWorld),
               "--rank must be -1 (from the environment) or 0 .. ",
               (c.world_size > 0 ? c.world_size : kMaxWorld) - 1, ", got ", c.rank);
  try {
    comm::check_init_method(c.init_method);
  } catch (const Error& e) {
    ENGINE_FAIL("--init-method: ", e.what());
  }
  ENGINE_CHECK(!c.drop_last || c.sharding == "sampler",
               "--drop-last applies to --sharding sampler only");
  ENGINE_CHECK(c.mode == "dp" || c.dp_devices.empty(), "--dp-devices applies to --mode dp only");
  ENGINE_CHECK(c.mode == "dp" || c.device != "cpu" || c.backend != "nccl",
               "--backend nccl reduces CUDA tensors and --device cpu trains on the CPU: use "
               "--backend ring");
  ENGINE_CHECK(c.backend != "mpi" || comm::mpi_built(), "--backend mpi: ", comm::mpi_build_hint());
  ENGINE_CHECK(c.algo == "auto" || c.backend == "ring", "ENGINE_ALGO=", c.algo,
               " picks among our host algorithms (--backend ring); --backend ", c.backend,
               " has its own");
  ENGINE_CHECK(c.cuda_ring == "auto" || c.backend == "ring", "ENGINE_CUDA_RING=", c.cuda_ring,
               " chooses how --backend ring moves GPU tensors; --backend ", c.backend,
               " does not use it");
  ENGINE_CHECK(c.cuda_ring == "auto" || c.device != "cpu", "ENGINE_CUDA_RING=", c.cuda_ring,
               " applies to GPUs and --device cpu trains on the CPU");
  ENGINE_CHECK(c.init_from.empty() || c.resume.empty() || resume_is_auto(c),
               "--init-from and --resume both give initial weights: choose one");
  ENGINE_CHECK(c.checkpoint_every >= 0, "--checkpoint-every must be 0 or more, got ",
               c.checkpoint_every);
  ENGINE_CHECK(c.checkpoint_every == 0 || !c.checkpoint.empty(),
               "--checkpoint-every needs --checkpoint FILE (where to write)");
  ENGINE_CHECK(!resume_is_auto(c) || !c.checkpoint.empty(),
               "--resume auto resumes from --checkpoint FILE: give --checkpoint");
  ENGINE_CHECK(!c.eval_only || !c.init_from.empty() || !c.resume.empty(),
               "--eval-only evaluates given weights: add --init-from FILE or --resume FILE");
  ENGINE_CHECK(c.cuda_graph != "on" || c.device != "cpu",
               "ENGINE_CUDA_GRAPH=on captures a GPU step and --device cpu trains on the CPU");
  ENGINE_CHECK(
      c.data_on_device != "on" || c.device != "cpu",
      "ENGINE_DATA_ON_DEVICE=on puts the data on a GPU and --device cpu trains on the CPU");
  ENGINE_CHECK(c.cuda_ring_protocol == "auto" || c.cuda_ring == "ipc",
               "ENGINE_RING_PROTOCOL=", c.cuda_ring_protocol,
               " chooses the CUDA IPC ring's protocol: it needs "
               "ENGINE_CUDA_RING=ipc (got ",
               c.cuda_ring, ")");
  ENGINE_CHECK(c.cuda_ring_channels == 0 || c.cuda_ring == "ipc",
               "ENGINE_RING_CHANNELS=", c.cuda_ring_channels,
               " sets the CUDA IPC ring's thread blocks: it needs "
               "ENGINE_CUDA_RING=ipc (got ",
               c.cuda_ring, ")");
  validate_distributed(c);
}

}  // namespace engine::apps
