// apps/train/distributed_flags.cpp: train's flags for what DDP and Horovod users reach for
// (gradient accumulation, ZeRO-1, SyncBatchNorm, gradient compression, the CUDA IPC ring's
// protocol), and their checks.
#include "apps/train/config.h"
#include "core/error.h"

namespace engine::apps {

void declare_distributed_flags(Flags& f, TrainConfig& c) {
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
        "vectors uncompressed");
  f.add("powersgd-start", &c.powersgd_start,
        "optimizer steps averaged uncompressed before PowerSGD starts");
  f.add("zero", &c.zero,
        "1: ZeRO-1, each rank keeps the optimizer state of its shard of the parameters "
        "(gradients reduce_scatter'ed and parameters all_gather'ed in --bucket-mb buckets); "
        "0: off. Checkpoints stay one file, resumable with or without --zero");
  f.add("staged-pipeline", &c.staged_pipeline,
        "1..4: the staged path's CUDA all_reduce (--cuda-ring staged, or ipc's fallback) cut into "
        "segments through N pinned slots, download, host ring and upload overlapping; 1 (the "
        "default): one download, the host ring, one upload");
  f.add_choice("cuda-ring-protocol", &c.cuda_ring_protocol,
               {"blocking", "auto", "ll", "simple", "events"},
               "--cuda-ring ipc: blocking (the kernel and the host's wait, the default), or "
               "queued on the stream, overlapping backward: auto (ll small, simple large), ll, "
               "simple, or events (steps chained by CUDA IPC events, no spinning kernel: for ranks "
               "sharing a GPU without MPS; docs/ring.md)");
  f.add("cuda-ring-channels", &c.cuda_ring_channels,
        "--cuda-ring ipc: thread blocks of the IPC ring's kernels (the blocking kernel's blocks, "
        "simple's channels), 1..32; 0 (the default): 8 blocks, 32 channels");
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
  if (powersgd_rank(c) > 0)
    add("compression " + c.grad_compression + " (from step " + std::to_string(c.powersgd_start) +
        ")");
  else if (c.grad_compression != "none")
    add("compression " + c.grad_compression);
  return s.empty() ? "" : "Options: " + s;
}

void validate_distributed(const TrainConfig& c) {
  ENGINE_CHECK(c.staged_pipeline >= 1 && c.staged_pipeline <= 4,
               "--staged-pipeline must be 1..4, got ", c.staged_pipeline);
  ENGINE_CHECK(
      c.staged_pipeline == 1 || (c.backend == "ring" && c.device != "cpu"),
      "--staged-pipeline pipelines how --backend ring stages GPU tensors; ",
      c.device == "cpu" ? "--device cpu has none" : "--backend " + c.backend + " has none");
  ENGINE_CHECK(c.cuda_ring_protocol == "auto" || c.cuda_ring == "ipc",
               "--cuda-ring-protocol chooses the CUDA IPC ring's protocol: it needs --cuda-ring "
               "ipc (got --cuda-ring ",
               c.cuda_ring, ")");
  ENGINE_CHECK(c.cuda_ring_channels == 0 || c.cuda_ring == "ipc",
               "--cuda-ring-channels sets the CUDA IPC ring's thread blocks: it needs --cuda-ring "
               "ipc (got --cuda-ring ",
               c.cuda_ring, ")");
  ENGINE_CHECK(c.cuda_ring_channels >= 0 && c.cuda_ring_channels <= 32,
               "--cuda-ring-channels must be 0..32 (0: the default), got ", c.cuda_ring_channels);
  ENGINE_CHECK(c.accumulate >= 1, "--accumulate must be at least 1, got ", c.accumulate);
  ENGINE_CHECK(c.grad_compression == "none" || c.grad_compression == "bf16" ||
                   c.grad_compression == "fp16" || powersgd_rank(c) > 0,
               "--grad-compression must be none, bf16, fp16 or powersgd:R, got '",
               c.grad_compression, "'");
  ENGINE_CHECK(c.powersgd_start >= 0, "--powersgd-start must be 0 or more, got ", c.powersgd_start);
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
