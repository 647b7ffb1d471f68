// apps/train/config.cpp: train's flags and their checks.
#include "apps/train/config.h"

#include "comm/backends/mpi/mpi_world.h"
#include "comm/rendezvous/rendezvous.h"
#include "nn/models.h"

namespace engine::apps {
namespace {

// GPU options: the ring's path; the step's graph and the data on the device
// (parallel/step_graph.h), both auto since an H200 ran them right (docs/gpu_bench).
void declare_gpu_flags(Flags& f, TrainConfig& c) {
  f.add_choice(
      "cuda-ring", &c.cuda_ring, {"auto", "staged", "ipc"},
      "--backend ring on GPUs: ipc (CUDA IPC between GPUs of one host), staged (pinned "
      "host memory and the TCP/shm transports); auto: ipc when every rank is on this host");
  f.add_choice("cuda-graph", &c.cuda_graph, {"auto", "on", "off"},
               "GPU: after 3 eager warm-up steps, capture the training step once as a CUDA "
               "graph and replay it (a short batch runs eagerly); auto: where every op of the "
               "step can be captured, else off with the reason; on: exit 2 naming what cannot "
               "be (docs/gpu.md)");
  f.add_choice("data-on-device", &c.data_on_device, {"auto", "on", "off"},
               "GPU: upload the training set once and gather each batch on the device from its "
               "indices (uploaded per step); auto: when it fits in a quarter of the free memory");
}

}  // namespace

namespace {

// Where the model trains, and which CUDA kernels run there.
void declare_device_flags(Flags& f, TrainConfig& c) {
  f.add_choice(
      "device", &c.device, {"auto", "cpu", "cuda"},
      "where to train; auto: cuda (rank r on cuda:LOCAL_RANK) when a GPU answers, else cpu");
  f.add_choice("mode", &c.mode, {"ddp", "dp"},
               "ddp: one process per rank (DistributedDataParallel); dp: one process drives every "
               "device of --dp-devices (nn.DataParallel)");
  f.add("dp-devices", &c.dp_devices,
        "--mode dp: devices, comma-separated (cuda:0,cuda:1 or cpu,cpu); empty: every visible GPU");
  f.add_choice(
      "cuda-kernels", &c.cuda_kernels, {"library", "engine"},
      "on a GPU: engine runs the engine's own deterministic kernels (convolution and linear "
      "weight gradients, pool backward, GEMMs with their bias, bf16 convolutions on tensor "
      "cores; kernels/choice.h): the same bytes run to run; library runs cuDNN's and cuBLAS's "
      "instead; the CPU accepts either and changes nothing");
}

}  // namespace

void declare_train_flags(Flags& f, TrainConfig& c) {
  f.add_choice("model", &c.model, {"simplecnn", "convnet", "net", "linear"}, "model to train");
  f.add("data-dir", &c.data_dir, "folder with the MNIST-format IDX files (raw or .gz)");
  f.add("epochs", &c.epochs, "epochs to train");
  f.add("steps", &c.steps, "stop after this many optimizer steps in all (0: no limit)");
  f.add("batch-size", &c.batch_size,
        "global batch size: each of W ranks takes int(B / W), as the tutorial's bsz");
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
  f.add("seed", &c.seed, "seed of initialisation, sharding, shuffling and dropout");
  f.add("threads", &c.threads,
        "CPU threads for kernels (0: $ENGINE_THREADS, else $OMP_NUM_THREADS, else usable cores / "
        "ranks on this host)");
  f.add_choice("shuffle", &c.shuffle, {"on", "off"},
               "reshuffle the shard every epoch; off: batches in shard order");
  f.add("dropout", &c.dropout, "override every dropout probability (< 0: model defaults)");
  f.add("init-from", &c.init_from, "load initial parameters and buffers (safetensors)");
  f.add("save", &c.save, "write the final parameters and buffers (safetensors)");
  f.add("checkpoint", &c.checkpoint,
        "write a training checkpoint (weights, optimizer, position, RNG) after every epoch "
        "(and every --checkpoint-every K steps)");
  f.add("resume", &c.resume,
        "continue from a training checkpoint; auto: from --checkpoint when that file exists, "
        "else start fresh (one command line for the first start and every restart)");
  f.add("checkpoint-every", &c.checkpoint_every,
        "also write --checkpoint every K optimizer steps (0: only after every epoch)");
  f.add_switch("eval-only", &c.eval_only,
               "evaluate the weights of --init-from or --resume on the test split; no training");
  f.add("metrics", &c.metrics, "write one JSON line per epoch to this file");
  declare_device_flags(f, c);
  f.add_choice("backend", &c.backend, {"ring", "nccl", "mpi"},
               "collectives: our ring (CPU or CUDA tensors), NCCL (CUDA tensors) or MPI (every "
               "collective through Open MPI, CUDA tensors staged; ranks started by mpirun)");
  declare_gpu_flags(f, c);
  f.add(
      "init-method", &c.init_method,
      "rendezvous: env:// (torchrun, Open MPI or Slurm variables), tcp://host:port, file:///path");
  f.add("world-size", &c.world_size, "number of ranks (-1: from the environment)");
  f.add("rank", &c.rank, "this process's rank (-1: from the environment)");
  f.add_choice("sync", &c.sync, {"allreduce", "reduce-broadcast", "bucketed"},
               "gradient synchronisation");
  f.add_choice("sharding", &c.sharding, {"partition", "sampler"},
               "partition: the tutorials' DataPartitioner; sampler: DistributedSampler");
  f.add("bucket-mb", &c.bucket_mb, "bucket size of --sync bucketed, in MiB");
  f.add_choice("transport", &c.transport, {"auto", "tcp", "shm"},
               "how ranks talk: shared memory on one host, TCP between hosts");
  f.add_choice("algo", &c.algo, {"auto", "ring", "rd", "rh", "tree"},
               "--backend ring: algorithm of all_reduce, broadcast and reduce: auto (by size), "
               "ring (chains for broadcast and reduce), rd (recursive doubling), rh "
               "(Rabenseifner's halving-doubling), tree (binomial trees)");
  f.add("timeout", &c.timeout_s, "seconds any wait for another rank may take");
  f.add("trace", &c.trace,
        "write a Chrome trace (Perfetto, chrome://tracing): one track per rank and thread");
  f.add("plot", &c.plot, "draw loss per step and test accuracy per epoch as an SVG");
  f.add_switch("profile", &c.profile,
               "after the run, print milliseconds per step by layer and phase, and GFLOP/s");
  f.add_switch("drop-last", &c.drop_last,
               "--sharding sampler: cut the dataset to a multiple of the world size");
  declare_distributed_flags(f, c);
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
  ENGINE_CHECK(c.algo == "auto" || c.backend == "ring",
               "--algo picks among our host algorithms (--backend ring); --backend ", c.backend,
               " has its own");
  ENGINE_CHECK(c.cuda_ring == "auto" || c.backend == "ring",
               "--cuda-ring chooses how --backend ring moves GPU tensors; --backend ", c.backend,
               " does not use it");
  ENGINE_CHECK(c.cuda_ring == "auto" || c.device != "cpu",
               "--cuda-ring applies to GPUs and --device cpu trains on the CPU");
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
               "--cuda-graph on captures a GPU step and --device cpu trains on the CPU");
  ENGINE_CHECK(c.data_on_device != "on" || c.device != "cpu",
               "--data-on-device on puts the data on a GPU and --device cpu trains on the CPU");
  validate_distributed(c);
}

}  // namespace engine::apps
