// apps/allreduce_bench/config.cpp: allreduce_bench's flags.
#include "apps/allreduce_bench/config.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "apps/flags.h"
#include "comm/backends/cuda_ipc/protocol/layout.h"
#include "comm/backends/mpi/mpi_world.h"
#include "core/error.h"
#include "core/knobs.h"

namespace engine::allreduce_bench {

int64_t Config::iters_for(int64_t nbytes) const {
  if (iters > 0) return iters;
  return std::max<int64_t>(5, std::min<int64_t>(200, 20000000 / std::max<int64_t>(nbytes, 1)));
}

std::vector<int64_t> Config::sizes() const {
  std::vector<int64_t> out;
  for (double b = double(min_bytes); b <= double(max_bytes) * (1 + 1e-12); b *= step_factor) {
    out.push_back(static_cast<int64_t>(std::llround(b)));
    if (step_factor <= 1.0) break;
  }
  return out;
}

std::vector<comm::Algo> Config::algos_for(CollOp c) const {
  using comm::Algo;
  if (!every_algo()) return algos;
  if (c == CollOp::AllReduce) return {Algo::Ring, Algo::Rd, Algo::Rh, Algo::Tree, Algo::Auto};
  if (c == CollOp::Broadcast || c == CollOp::Reduce) return {Algo::Ring, Algo::Tree, Algo::Auto};
  return {Algo::Auto};
}

int64_t parse_bytes(const std::string& flag, const std::string& value) {
  ENGINE_USAGE_CHECK(!value.empty(), "--", flag, " needs a size");
  int64_t mult = 1;
  std::string digits = value;
  switch (value.back()) {
    case 'K':
    case 'k':
      mult = int64_t(1) << 10;
      break;
    case 'M':
    case 'm':
      mult = int64_t(1) << 20;
      break;
    case 'G':
    case 'g':
      mult = int64_t(1) << 30;
      break;
    default:
      break;
  }
  if (mult > 1) digits.pop_back();
  const int64_t n = apps::Flags::parse_int(flag, digits);
  ENGINE_USAGE_CHECK(n >= 0, "--", flag, ": '", value, "' is negative");
  ENGINE_USAGE_CHECK(n <= std::numeric_limits<int64_t>::max() / mult, "--", flag, ": '", value,
                     "' is out of range");
  return n * mult;
}

namespace {

// --dtype and --algo, after --op and --backend.
void set_dtype_and_algo(Config* cfg, const std::string& dtype, const std::string& algo) {
  ENGINE_USAGE_CHECK(dtype_from_any_name(dtype, &cfg->dtype), "--dtype: unknown '", dtype, "'");
  ENGINE_USAGE_CHECK(cfg->op != comm::ReduceOp::Avg || dtype_is_floating(cfg->dtype),
                     "--op avg needs a floating --dtype (float32, bfloat16, float16)");
  if (algo == "all")
    cfg->algos = {comm::Algo::Ring, comm::Algo::Rd, comm::Algo::Rh, comm::Algo::Tree,
                  comm::Algo::Auto};
  else
    cfg->algos = {comm::algo_from_name(algo)};
  ENGINE_USAGE_CHECK(algo == "auto" || cfg->ours(),
                     "--algo picks among our host algorithms: not with --backend ", cfg->backend,
                     cfg->cuda() && cfg->ring_transport == "ipc" ? " --ring-transport ipc" : "");
}

// The combinations of --backend, --device, --world-size, --ring-transport and --collective.
void check_backend_flags(const apps::Flags& f, const Config& c, int64_t world,
                         const std::string& coll) {
  ENGINE_USAGE_CHECK(c.cuda() || !c.nccl(), "--backend nccl needs --device cuda");
  ENGINE_USAGE_CHECK(c.backend != "mpi" || comm::mpi_built(),
                     "--backend mpi: ", comm::mpi_build_hint());
  ENGINE_USAGE_CHECK(c.backend != "mpi" || world == 0,
                     "--backend mpi joins ranks started by mpirun (mpirun -np W allreduce_bench "
                     "--backend mpi); --world-size forks ranks that are not MPI processes");
  ENGINE_USAGE_CHECK(!f.given("ring-transport") || (c.cuda() && c.backend == "ring"),
                     "--ring-transport applies to --device cuda --backend ring only");
  ENGINE_USAGE_CHECK(!f.given("cuda-ring-protocol") || (c.cuda() && c.ring_transport == "ipc"),
                     "--cuda-ring-protocol applies to --device cuda --ring-transport ipc only");
  for (const char* alone : {"all_to_all", "chunk_tree_all_reduce"})
    ENGINE_USAGE_CHECK(coll != alone || (!c.cuda() && c.backend == "ring"), "--collective ", alone,
                       " runs on host buffers over the ring's transports (--device cpu "
                       "--backend ring)");
}

// --collective chunk_tree_all_reduce: a sum, by its one algorithm.
void check_chunk_tree_flags(const apps::Flags& f, const std::string& coll, const std::string& op) {
  if (coll != "chunk_tree_all_reduce") return;
  ENGINE_USAGE_CHECK(op == "sum", "--collective chunk_tree_all_reduce sums: --op sum only");
  ENGINE_USAGE_CHECK(!f.given("algo"),
                     "--algo does not apply to --collective chunk_tree_all_reduce (it has one "
                     "algorithm)");
}

constexpr const char* kIpcProtocolHelp =
    "--ring-transport ipc, queued on the stream: auto (the default: ll for small sizes, simple "
    "above; events where ranks share a GPU without MPS), ll, simple, or events (steps chained by "
    "CUDA IPC events, no spinning kernel: for ranks sharing a GPU without MPS)";

// The CUDA IPC ring's flags (--ring-transport ipc).
void add_ipc_flags(apps::Flags& f, Config* cfg, std::string* slot_bytes) {
  // The sweep flags' defaults: what the ENGINE_* variables say (docs/knobs.md), else auto and 0.
  cfg->cuda_ring_protocol = knobs::ring_protocol();
  cfg->cuda_ring_channels = knobs::ring_channels();
  f.add_choice("cuda-ring-protocol", &cfg->cuda_ring_protocol, {"auto", "ll", "simple", "events"},
               kIpcProtocolHelp);
  f.add("cuda-ring-channels", &cfg->cuda_ring_channels,
        "--ring-transport ipc: simple's channels (thread blocks), 1..32; 0: the default (32)");
  f.add("cuda-ring-slot-bytes", slot_bytes,
        "--ring-transport ipc: simple's FIFO slot size (K, M suffixes; a multiple of 16 up to "
        "64M); 0: the default (512K)");
}

void check_ipc_flags(const apps::Flags& f, Config* c, const std::string& slot_bytes) {
  for (const char* flag : {"cuda-ring-channels", "cuda-ring-slot-bytes"})
    ENGINE_USAGE_CHECK(!f.given(flag) || (c->cuda() && c->ring_transport == "ipc"), "--", flag,
                       " applies to --device cuda --ring-transport ipc only");
  ENGINE_USAGE_CHECK(
      c->cuda_ring_channels >= 0 && c->cuda_ring_channels <= comm::ipc::proto::kMaxChannels,
      "--cuda-ring-channels must be 0..", comm::ipc::proto::kMaxChannels, " (0: the default)");
  c->cuda_ring_slot_bytes = parse_bytes("cuda-ring-slot-bytes", slot_bytes);
  ENGINE_USAGE_CHECK(c->cuda_ring_slot_bytes % 16 == 0 && c->cuda_ring_slot_bytes <= (64 << 20),
                     "--cuda-ring-slot-bytes must be a multiple of 16 up to 64M (0: the default)");
}

}  // namespace

bool parse_flags(int argc, char** argv, Config* cfg) {
  apps::Flags f(
      "allreduce_bench: our collectives timed nccl-tests style over real transports.\n"
      "  allreduce_bench --world-size W [flags]      forks W ranks on this host\n"
      "  launch --nproc-per-node W -- allreduce_bench [flags]   joins through env://");
  int64_t world = 0;
  std::string transport = "auto", min_b = "8", max_b = "64M", op = "sum", coll = "all_reduce",
              init = cfg->init_method, dtype = "float32", algo = knobs::algo();  // --algo's default
  int64_t check = 1;
  f.add("world-size", &world, "fork this many ranks on this host (0: join through --init-method)");
  f.add("init-method", &init, "how ranks meet when not forked: env://, tcp://host:port, file://");
  f.add_choice("transport", &transport, {"auto", "tcp", "shm"}, "data transport between ranks");
  f.add("min-bytes", &min_b, "smallest size (K, M, G suffixes)");
  f.add("max-bytes", &max_b, "largest size");
  f.add("step-factor", &cfg->step_factor, "size multiplier between rows");
  f.add("iters", &cfg->iters,
        "timed calls per size; 0: max(5, min(200, 2e7 / bytes)) as the gloo anchor");
  f.add("warmup", &cfg->warmup, "untimed calls per size before timing");
  f.add_choice("op", &op, {"sum", "avg", "max", "min", "prod"}, "reduction op");
  f.add_choice("dtype", &dtype, {"float32", "bfloat16", "float16", "int32", "int64", "uint8"},
               "element type (bfloat16 and float16 reduce in fp32, rounded once)");
  f.add_choice("algo", &algo, {"auto", "ring", "rd", "rh", "tree", "all"},
               "algorithm of all_reduce, broadcast and reduce (--backend ring): auto (by size), "
               "ring (chains for broadcast and reduce), rd (recursive doubling), rh "
               "(Rabenseifner's halving-doubling), tree (binomial), all (each, side by side)");
  f.add_choice("collective", &coll,
               {"all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter", "all_to_all",
                "chunk_tree_all_reduce", "all"},
               "collective(s) to run, one table each (all: every one but all_to_all and "
               "chunk_tree_all_reduce, the sum over the fixed chunk tree with one chunk per rank)");
  std::string two_level = "auto";
  f.add_choice("two-level", &two_level, {"auto", "on", "off"},
               "all_reduce in two levels across hosts (reduce in each host, all_reduce among "
               "one leader per host, broadcast): auto when every host has 2+ ranks");
  f.add("check", &check, "1: a correctness pass per size (separate from timing); 0: none");
  f.add("json", &cfg->json_path, "also write one JSON object per row to this file (- = stdout)");
  f.add("segment-bytes", &cfg->segment_bytes, "ring pipelining grain (0: the communicator's)");
  f.add("timeout", &cfg->timeout_s, "seconds any rendezvous or wait may take");
  f.add_choice("device", &cfg->device, {"cpu", "cuda"},
               "where the buffers live; cuda: rank r on cuda:(local rank % devices)");
  f.add_choice("backend", &cfg->backend, {"ring", "nccl", "mpi"},
               "ring: our Communicator (CUDA tensors through its Tensor overloads); nccl: "
               "NcclGroup, one GPU per rank (--device cuda); mpi: every collective "
               "through MPI (ranks started by mpirun -np W; CUDA tensors staged)");
  f.add_choice("ring-transport", &cfg->ring_transport, {"staged", "ipc"},
               "--device cuda --backend ring: staged through pinned host memory, or all_reduce "
               "on the CUDA IPC ring (GPUs of one host)");
  std::string slot_bytes = "0";
  add_ipc_flags(f, cfg, &slot_bytes);
  if (!f.parse(argc, argv)) return false;
  ENGINE_USAGE_CHECK(f.rest().empty(), "unexpected arguments after --");
  check_backend_flags(f, *cfg, world, coll);
  check_ipc_flags(f, cfg, slot_bytes);
  cfg->two_level = comm::two_level_from_name(two_level);

  ENGINE_USAGE_CHECK(world >= 0 && world <= 64, "--world-size must be 0..64");
  cfg->world_size = static_cast<int>(world);
  cfg->init_method = init;
  cfg->transport = comm::transport_kind_from_name(transport);
  cfg->min_bytes = parse_bytes("min-bytes", min_b);
  cfg->max_bytes = parse_bytes("max-bytes", max_b);
  ENGINE_USAGE_CHECK(cfg->min_bytes >= 1 && cfg->min_bytes <= cfg->max_bytes,
                     "need 1 <= --min-bytes <= --max-bytes");
  ENGINE_USAGE_CHECK(cfg->step_factor > 1.0, "--step-factor must be above 1");
  ENGINE_USAGE_CHECK(cfg->iters >= 0 && cfg->warmup >= 0, "--iters and --warmup must be >= 0");
  ENGINE_USAGE_CHECK(cfg->timeout_s > 0 && cfg->timeout_s <= 7 * 24 * 3600,
                     "--timeout must be in (0, 604800] seconds");
  ENGINE_USAGE_CHECK(check == 0 || check == 1, "--check is 0 or 1");
  cfg->check = check == 1;
  cfg->op = comm::reduce_op_from_name(op);
  check_chunk_tree_flags(f, coll, op);
  set_dtype_and_algo(cfg, dtype, algo);
  if (coll == "all")
    cfg->collectives.assign(std::begin(kCollectives), std::end(kCollectives));
  else
    cfg->collectives = {collective_from_name(coll)};
  return true;
}

}  // namespace engine::allreduce_bench
