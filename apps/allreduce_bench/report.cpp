// apps/allreduce_bench/report.cpp: the table and JSON rows.
#include "apps/allreduce_bench/report.h"

#include <algorithm>
#include <cctype>
#include <fstream>

#include "comm/backends/cuda_ipc/cuda_ipc_ring.h"
#include "io/json.h"

namespace engine::allreduce_bench {
namespace {

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  if (!(f >> a >> b >> c)) return "unknown";
  return a + " " + b + " " + c;
}

std::string iters_text(const Config& cfg) {
  if (cfg.iters > 0) return std::to_string(cfg.iters);
  return "max(5, min(200, 2e7 / bytes))";
}

}  // namespace

void print_preamble(FILE* out, const Config& cfg, int world, const std::string& transport,
                    size_t segment_bytes) {
  std::fprintf(
      out, "# allreduce_bench: %d rank(s) %s, transport %s, op %s, %s\n", world,
      cfg.world_size > 0 ? "forked on this host" : ("joined via " + cfg.init_method).c_str(),
      transport.c_str(), comm::reduce_op_name(cfg.op), dtype_long_name(cfg.dtype));
  std::fprintf(out, "# iters %s, warmup %lld, check %s, segment %zu bytes, load average %s\n",
               iters_text(cfg).c_str(), static_cast<long long>(cfg.warmup),
               cfg.check ? "on (separate pass)" : "off", segment_bytes, load_average().c_str());
}

void print_device_line(FILE* out, const Config& cfg, const std::string& devices,
                       const std::string& backend) {
  std::fprintf(out, "# device %s: %s; backend %s\n", cfg.device.c_str(), devices.c_str(),
               backend.c_str());
  std::fflush(out);
}

// nccl-tests' layout: size, count, type, redop, root, then time, algbw, busbw and #wrong out of
// place and in place; ours adds iters and the algorithm that ran.
void print_table_header(FILE* out, CollOp c, int world) {
  const char* factor = "1";
  if (c == CollOp::AllReduce || c == CollOp::ChunkTree) factor = "2(n-1)/n";
  if (c == CollOp::AllGather || c == CollOp::ReduceScatter || c == CollOp::AllToAll)
    factor = "(n-1)/n";
  std::fprintf(out, "#\n# %s, n = %d, busbw = algbw * %s\n", comm::coll_op_name(c), world, factor);
  std::fprintf(out, "# %12s %12s %8s %6s %5s %6s %10s %43s %43s\n", "", "", "", "", "", "", "",
               "out-of-place", "in-place");
  std::fprintf(out, "# %12s %12s %8s %6s %5s %6s %10s %12s %10s %10s %7s %12s %10s %10s %7s\n",
               "size(B)", "count", "type", "redop", "root", "iters", "algo", "time(us)", "algbw",
               "busbw", "#wrong", "time(us)", "algbw", "busbw", "#wrong");
  std::fprintf(out, "# %12s %12s %8s %6s %5s %6s %10s %12s %10s %10s %7s %12s %10s %10s %7s\n", "",
               "(elements)", "", "", "", "", "", "", "(GB/s)", "(GB/s)", "", "", "(GB/s)", "(GB/s)",
               "");
  std::fflush(out);
}

void print_row(FILE* out, const Row& r) {
  auto wrong = [](const Timing& t) {
    return t.wrong < 0 ? std::string("N/A") : std::to_string(t.wrong);
  };
  const int root = r.collective == CollOp::Broadcast || r.collective == CollOp::Reduce ? 0 : -1;
  std::string redop = comm::reduce_op_name(r.op);
  for (auto& ch : redop) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (r.collective != CollOp::AllReduce && r.collective != CollOp::Reduce &&
      r.collective != CollOp::ReduceScatter && r.collective != CollOp::ChunkTree)
    redop = "none";
  std::fprintf(out,
               "  %12lld %12lld %8s %6s %5d %6lld %10s %12.2f %10.3f %10.3f %7s %12.2f %10.3f "
               "%10.3f %7s\n",
               static_cast<long long>(r.bytes), static_cast<long long>(r.count),
               type_column_name(r.dtype), redop.c_str(), root, static_cast<long long>(r.iters),
               r.algo.c_str(), r.oop.time_us, r.oop.algbw_gbs, r.oop.busbw_gbs,
               wrong(r.oop).c_str(), r.ip.time_us, r.ip.algbw_gbs, r.ip.busbw_gbs,
               wrong(r.ip).c_str());
  std::fflush(out);
}

void print_side_by_side(FILE* out, const std::vector<Row>& rows) {
  if (rows.empty()) return;
  std::vector<std::string> algos;
  for (const Row& r : rows)
    if (std::find(algos.begin(), algos.end(), r.algo.substr(0, 4) == "auto" ? "auto" : r.algo) ==
        algos.end())
      algos.push_back(r.algo.substr(0, 4) == "auto" ? "auto" : r.algo);
  std::fprintf(out, "#\n# %s side by side: out-of-place time(us) [busbw GB/s]\n# %12s",
               comm::coll_op_name(rows[0].collective), "size(B)");
  for (const auto& a : algos) std::fprintf(out, " %20s", a.c_str());
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i == 0 || rows[i].bytes != rows[i - 1].bytes)
      std::fprintf(out, "\n  %12lld", static_cast<long long>(rows[i].bytes));
    char cell[64];
    std::snprintf(cell, sizeof cell, "%.2f [%.3f]", rows[i].oop.time_us, rows[i].oop.busbw_gbs);
    std::fprintf(out, " %20s", cell);
  }
  std::fprintf(out, "\n");
  std::fflush(out);
}

// What the IPC ring ran for a float32 all_reduce of `bytes` over `world` ranks under the default
// geometry (comm/backends/cuda_ipc/cuda_ipc_ring.h's IpcRingOptions) in `mode` (auto in a
// "time-sliced" ring runs events).
static std::string ipc_protocol_ran(const std::string& flag, int64_t bytes, int world,
                                    const std::string& mode) {
  comm::IpcProtocol p = comm::IpcProtocol::Auto;
  if (!comm::parse_ipc_protocol(flag, &p)) return flag;
  comm::ipc::proto::Geometry g;
  g.world = world;
  g.ll_max_bytes = static_cast<int64_t>(comm::IpcRingOptions{}.ll_max_bytes);
  return comm::ipc_protocol_name(
      comm::ipc::proto::protocol_ran(p, mode == "time-sliced", bytes, g));
}

std::string json_row(const Row& r, const Config& cfg, const std::string& mode) {
  Json j = {{"collective", comm::coll_op_name(r.collective)},
            {"world", r.world},
            {"transport", r.transport},
            {"device", cfg.device},
            {"backend", cfg.backend}};
  if (cfg.cuda() && cfg.backend == "ring") j["ring_transport"] = cfg.ring_transport;
  if (cfg.cuda() && cfg.backend == "ring" && cfg.ring_transport == "ipc" &&
      r.collective == CollOp::AllReduce) {
    j["protocol"] = cfg.cuda_ring_protocol;  // auto: what ran at this size in protocol_ran
    j["protocol_ran"] = ipc_protocol_ran(cfg.cuda_ring_protocol, r.bytes, r.world, mode);
    // The geometry (--cuda-ring-channels, --cuda-ring-slot-bytes, else the defaults): channels
    // of Simple (LL runs a fixed grid, events one sized to the step).
    const comm::IpcRingOptions d;
    j["channels"] = cfg.cuda_ring_channels > 0 ? cfg.cuda_ring_channels : int64_t(d.channels);
    j["slot_bytes"] =
        cfg.cuda_ring_slot_bytes > 0 ? cfg.cuda_ring_slot_bytes : int64_t(d.slot_bytes);
    if (!mode.empty()) j["mode"] = mode;
  }
  auto wrong = [](const Timing& t) { return t.wrong < 0 ? Json(nullptr) : Json(t.wrong); };
  const Timing& n = r.native();
  j.update({{"op", comm::reduce_op_name(cfg.op)},
            {"bytes", r.bytes},
            {"count", r.count},
            {"iters", r.iters},
            {"time_us", n.time_us},
            {"algbw_gbs", n.algbw_gbs},
            {"busbw_gbs", n.busbw_gbs},
            {"wrong", wrong(n)},
            {"dtype", dtype_long_name(r.dtype)},
            {"algo", r.algo},
            {"oop_time_us", r.oop.time_us},
            {"oop_algbw_gbs", r.oop.algbw_gbs},
            {"oop_busbw_gbs", r.oop.busbw_gbs},
            {"oop_wrong", wrong(r.oop)},
            {"ip_time_us", r.ip.time_us},
            {"ip_algbw_gbs", r.ip.algbw_gbs},
            {"ip_busbw_gbs", r.ip.busbw_gbs},
            {"ip_wrong", wrong(r.ip)}});
  return dump_json(j);
}

}  // namespace engine::allreduce_bench
