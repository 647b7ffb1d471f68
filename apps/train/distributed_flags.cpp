// apps/train/distributed_flags.cpp: train's flags for a data-parallel job (how ranks meet and
// talk, how the data is split, and what DDP and Horovod users reach for: gradient accumulation,
// ZeRO-1, SyncBatchNorm, gradient compression), and their checks.
#include "apps/train/config.h"
#include "core/error.h"

namespace engine::apps {
namespace {

// How the ranks meet, talk and split the data.
void declare_job_flags(Flags& f, TrainConfig& c) {
  f.add_choice("backend", &c.backend, {"ring", "nccl", "mpi"},
               "collectives: our ring (CPU or CUDA tensors), NCCL (CUDA tensors) or MPI (every "
               "collective through Open MPI, CUDA tensors staged; ranks started by mpirun)");
  f.add(
      "init-method", &c.init_method,
      "rendezvous: env:// (torchrun, Open MPI or Slurm variables), tcp://host:port, file:///path");
  f.add("world-size", &c.world_size, "number of ranks (-1: from the environment)");
  f.add("rank", &c.rank, "this process's rank (-1: from the environment)");
  f.add_choice("mode", &c.mode, {"ddp", "dp"},
               "ddp: one process per rank (DistributedDataParallel); dp: one process drives every "
               "device of --dp-devices (nn.DataParallel)");
  f.add("dp-devices", &c.dp_devices,
        "--mode dp: devices, comma-separated (cuda:0,cuda:1 or cpu,cpu); empty: every visible GPU");
  f.add_choice("transport", &c.transport, {"auto", "tcp", "shm"},
               "how ranks talk: shared memory on one host, TCP between hosts");
  f.add("timeout", &c.timeout_s, "seconds any wait for another rank may take");
  f.add_choice("on-rank-loss", &c.on_rank_loss, {"stop", "continue"},
               "stop: a lost rank (gone, frozen or cut off) ends the job; continue: the others "
               "regroup and train on from the last completed step (on the same bits with "
               "--world-invariant; the store must outlive any rank: launch --on-rank-loss "
               "continue)");
  f.add_choice("sharding", &c.sharding, {"partition", "sampler"},
               "partition: the tutorials' DataPartitioner; sampler: DistributedSampler");
  f.add_switch("drop-last", &c.drop_last,
               "--sharding sampler: cut the dataset to a multiple of the world size");
}

}  // namespace

void declare_distributed_flags(Flags& f, TrainConfig& c) {
  f.section("Distributed");
  declare_job_flags(f, c);
  f.add_choice("sync", &c.sync, {"allreduce", "reduce-broadcast", "bucketed"},
               "gradient synchronisation");
  f.add("bucket-mb", &c.bucket_mb, "bucket size of --sync bucketed, in MiB");
  f.add("accumulate", &c.accumulate,
        "batches per optimizer step: gradients of K batches summed (each loss scaled by 1/K), "
        "synchronised on the K-th only; --steps counts optimizer steps; an epoch's last, short "
        "group is stepped");
  f.add_switch("sync-bn", &c.sync_bn,
               "SyncBatchNorm: batch norm statistics (and their gradients) over the global "
               "batch, one all_reduce per layer; running buffers equal on every rank. Nothing "
               "to do on a model without batch norm");
  f.add("grad-compression", &c.grad_compression,
        "none | bf16 | fp16 | powersgd:R. bf16, fp16: gradients travel and are summed in that "
        "type (DDP's bf16/fp16_compress_hook); powersgd:R: PowerSGD (PyTorch's powerSGD_hook), "
        "each matrix gradient sent as two rank-R factors with error feedback and warm start, "
        "vectors uncompressed (from optimizer step ENGINE_POWERSGD_START, default 100)");
  f.add("zero", &c.zero,
        "1: ZeRO-1, each rank keeps the optimizer state of its shard of the parameters "
        "(gradients reduce_scatter'ed and parameters all_gather'ed in --bucket-mb buckets); "
        "0: off. Checkpoints stay one file, resumable with or without --zero");
  f.add_switch("world-invariant", &c.world_invariant,
               "the same bits at every world size: one global data order (rank r takes its "
               "whole chunks of 16 images of each global batch; an epoch's last, short batch is "
               "dropped), dropout by global position, gradients, losses and BatchNorm's "
               "statistics (over the global batch, as --sync-bn) summed over the chunks in one "
               "fixed tree. CPU only");
}

int64_t powersgd_rank(const TrainConfig& c) {
  const std::string prefix = "powersgd:";
  if (c.grad_compression.rfind(prefix, 0) != 0) return 0;
  const std::string r = c.grad_compression.substr(prefix.size());
  int64_t v = 0;
  bool ok = !r.empty() && r.size() <= 4;
  for (char ch : r) {
    ok = ok && ch >= '0' && ch <= '9';
    v = v * 10 + (ch - '0');
  }
  ENGINE_CHECK(ok && v >= 1, "--grad-compression '", c.grad_compression,
               "': the rank R of powersgd:R must be an integer 1 .. 9999");
  return v;
}

std::string options_line(const TrainConfig& c) {
  std::string s;
  auto add = [&](const std::string& item) { s += (s.empty() ? "" : ", ") + item; };
  if (c.accumulate > 1) add("accumulate " + std::to_string(c.accumulate));
  if (c.zero) add("zero 1");
  if (c.sync_bn) add("sync-bn");
  if (c.world_invariant) add("world-invariant (the chunk tree)");
  if (powersgd_rank(c) > 0)
    add("compression " + c.grad_compression + " (from step " + std::to_string(c.powersgd_start) +
        ")");
  else if (c.grad_compression != "none")
    add("compression " + c.grad_compression);
  return s.empty() ? "" : "Options: " + s;
}

namespace {

// What the world-invariant mode does not cover (yet): each refused with the flag that asks for it.
void validate_world_invariant(const TrainConfig& c) {
  if (!c.world_invariant) return;
  const char* const what = "--world-invariant sums the gradients over its fixed chunk tree";
  ENGINE_CHECK(c.grad_compression == "none", "--world-invariant and --grad-compression ",
               c.grad_compression, ": compressed gradients differ with the world size");
  ENGINE_CHECK(c.sync == "bucketed", what, ": --sync ", c.sync, " does not apply");
  ENGINE_CHECK(c.mode == "ddp", "--world-invariant runs one process per rank (--mode ddp)");
  ENGINE_CHECK(c.backend != "nccl", what, " on the CPU; --backend nccl reduces CUDA tensors");
  ENGINE_CHECK(c.device != "cuda", "--world-invariant runs on the CPU for now (--device cpu)");
}

// What --on-rank-loss continue stands on: a state any survivor holds whole.
void validate_rank_loss(const TrainConfig& c) {
  if (c.on_rank_loss == "stop") return;
  ENGINE_CHECK(powersgd_rank(c) == 0, "--on-rank-loss continue and --grad-compression ",
               c.grad_compression, ": PowerSGD's error feedback is each rank's own");
  ENGINE_CHECK(c.zero == 0, "--on-rank-loss continue and --zero 1: a lost rank takes its shard ",
               "of the optimizer state with it");
  ENGINE_CHECK(c.backend == "ring", "--on-rank-loss continue regroups our own collectives; ",
               "--backend ", c.backend, " cannot drop a rank");
}

}  // namespace

void validate_distributed(const TrainConfig& c) {
  validate_world_invariant(c);
  validate_rank_loss(c);
  ENGINE_CHECK(c.accumulate >= 1, "--accumulate must be at least 1, got ", c.accumulate);
  ENGINE_CHECK(c.grad_compression == "none" || c.grad_compression == "bf16" ||
                   c.grad_compression == "fp16" || powersgd_rank(c) > 0,
               "--grad-compression must be none, bf16, fp16 or powersgd:R, got '",
               c.grad_compression, "'");
  ENGINE_CHECK(c.grad_compression == "none" || c.mode == "ddp",
               "--grad-compression compresses what ranks of --mode ddp send; --mode dp sends "
               "nothing");
  ENGINE_CHECK(c.grad_compression == "none" || c.zero == 0, "--grad-compression ",
               c.grad_compression,
               " and --zero 1 both replace the gradient all_reduce: choose one");
  ENGINE_CHECK(c.zero == 0 || c.zero == 1, "--zero must be 0 or 1 (ZeRO stage 1), got ", c.zero);
  ENGINE_CHECK(!c.sync_bn || c.mode == "ddp",
               "--sync-bn synchronises the ranks of --mode ddp; --mode dp's replicas keep "
               "per-chunk statistics, as nn.DataParallel's");
  ENGINE_CHECK(c.zero == 0 || c.mode == "ddp",
               "--zero 1 shards the optimizer across the ranks of --mode ddp; --mode dp is one "
               "process with one optimizer");
  ENGINE_CHECK(c.zero == 0 || c.sync == "bucketed",
               "--zero 1 replaces the gradient all_reduce "
               "with reduce_scatter and all_gather in --bucket-mb buckets: --sync ",
               c.sync, " does not apply (leave --sync bucketed)");
}

}  // namespace engine::apps
