// apps/train/config.h: everything `train` is told: its command line, and the ENGINE_* variables
// that force a choice (core/knobs.h, docs/knobs.md), read into the same fields by read_knobs.
#pragma once
#include <cstdint>
#include <string>

#include "apps/flags.h"

namespace engine::apps {

struct TrainConfig {
  std::string model = "simplecnn";
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int64_t epochs = 1;
  int64_t steps = 0;         // 0: no limit
  int64_t batch_size = 128;  // global batch, split across ranks
  double lr = 0.01;
  double momentum = 0.5;
  std::string optimizer = "sgd";
  int64_t seed = 1234;
  int64_t threads = 0;  // 0: core/threads.h default_threads
  std::string shuffle = "on";
  double dropout = -1;  // < 0: the models' own probabilities
  std::string init_from, save, checkpoint, resume, metrics;
  // Also write --checkpoint every K optimizer steps (0: only at the end of each epoch).
  int64_t checkpoint_every = 0;
  // Evaluate the weights of --init-from or --resume on the test split and stop: no training.
  bool eval_only = false;
  // stop | skip | off: what a non-finite loss, gradient or weight does (parallel/nonfinite.h).
  std::string nonfinite = "stop";
  std::string precision = "fp32";       // fp32 | bf16: conv2d and linear in bf16 (nn/precision.h)
  std::string cuda_kernels = "engine";  // ENGINE_CUDA_KERNELS: kernels/choice.h (GPU only)
  std::string device = "auto";          // auto: cuda:LOCAL_RANK when a GPU answers, else cpu
  // ddp: one process per rank (DistributedDataParallel); dp: this one process drives every device
  // of dp_devices (nn.DataParallel).
  std::string mode = "ddp";
  std::string dp_devices;                   // "cuda:0,cuda:1", "cpu,cpu"; empty: every visible GPU
  std::string cuda_ring = "auto";           // ENGINE_CUDA_RING: --backend ring on GPUs
  std::string cuda_ring_protocol = "auto";  // ENGINE_RING_PROTOCOL: the CUDA IPC ring's protocol
  int64_t cuda_ring_channels = 0;  // ENGINE_RING_CHANNELS: its thread blocks; 0: its default
  // Data parallelism (one process per rank).
  std::string backend = "ring";
  std::string init_method = "env://";
  int64_t world_size = -1;  // -1: from the init method's environment
  int64_t rank = -1;
  std::string sync = "bucketed";
  std::string sharding = "partition";
  double bucket_mb = 25;
  std::string transport = "auto";
  std::string algo = "auto";  // ENGINE_ALGO: the host algorithm of all_reduce, broadcast, reduce
  double timeout_s = 300;
  // stop: a lost rank ends the job; continue: the others regroup and go on (parallel/elastic.h).
  std::string on_rank_loss = "stop";
  bool drop_last = false;
  // Distributed-training options of DDP and Horovod (docs/training.md, "Accumulation, ZeRO,
  // SyncBatchNorm, compression").
  int64_t accumulate = 1;  // batches per optimizer step (parallel/accumulate.h)
  bool sync_bn = false;    // batch norm over the global batch (nn/sync_batch_norm.h)
  // none | bf16 | fp16 (comm/half_grad_sync.h) | powersgd:R (comm/powersgd.h)
  std::string grad_compression = "none";
  int64_t powersgd_start = 100;  // ENGINE_POWERSGD_START: steps uncompressed before PowerSGD
  int64_t zero = 0;  // 1: ZeRO-1, optimizer state sharded across ranks (parallel/zero.h)
  // The same bits at every world size: one global data order, chunked gradients summed in the
  // fixed chunk tree (parallel/tree_reducer.h; docs/training.md).
  bool world_invariant = false;
  // Watching and measuring.
  std::string trace;            // Chrome trace-event JSON of the run
  std::string plot;             // SVG of loss per step and test accuracy per epoch
  bool profile = false;         // print where the step's time goes, per layer and phase
  std::string flight_recorder;  // DIR: the flight recorder's dumps
  // ENGINE_CUDA_GRAPH auto | on | off: the step captured as one CUDA graph (docs/gpu.md).
  std::string cuda_graph = "auto";
  // ENGINE_DATA_ON_DEVICE auto | on | off: the training set on the GPU (data/device_data.h).
  std::string data_on_device = "auto";
};

// Declares train's flags on f, bound to c, one --help section per topic; the flags that became
// ENGINE_* variables are refused naming the variable.
void declare_train_flags(Flags& f, TrainConfig& c);
// Fills the fields the ENGINE_* variables set (core/knobs.h); a bad value of any variable throws
// engine::Error naming it.
void read_knobs(TrainConfig& c);
// Checks values that flags alone cannot (ranges, combinations); throws engine::Error.
void validate(const TrainConfig& c);
// The flags of a data-parallel job (ranks, data split, accumulation, ZeRO, SyncBatchNorm,
// compression), and their checks (apps/train/distributed_flags.cpp); declare_train_flags and
// validate call them.
void declare_distributed_flags(Flags& f, TrainConfig& c);
void validate_distributed(const TrainConfig& c);
// --grad-compression powersgd:R -> R; 0 for any other compression.
int64_t powersgd_rank(const TrainConfig& c);
// What rank 0 says is on: "Options: accumulate 4, zero 1, sync-bn, compression powersgd:4
// (from step 100)"; "" when none is.
std::string options_line(const TrainConfig& c);

// --resume auto: resume from --checkpoint when that file exists, start fresh otherwise.
inline bool resume_is_auto(const TrainConfig& c) {
  return c.resume == "auto";
}

}  // namespace engine::apps
