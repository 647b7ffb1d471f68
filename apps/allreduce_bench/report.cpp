// apps/allreduce_bench/report.cpp: the table and JSON rows.
#include "apps/allreduce_bench/report.h"

#include <fstream>

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
      out, "# allreduce_bench: %d rank(s) %s, transport %s, op %s, float32\n", world,
      cfg.world_size > 0 ? "forked on this host" : ("joined via " + cfg.init_method).c_str(),
      transport.c_str(), comm::reduce_op_name(cfg.op));
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

void print_table_header(FILE* out, CollOp c, int world) {
  const char* factor = "1";
  if (c == CollOp::AllReduce) factor = "2(n-1)/n";
  if (c == CollOp::AllGather || c == CollOp::ReduceScatter || c == CollOp::AllToAll)
    factor = "(n-1)/n";
  std::fprintf(out, "#\n# %s, n = %d, busbw = algbw * %s\n", comm::coll_op_name(c), world, factor);
  std::fprintf(out, "# %12s %12s %6s %8s %12s %10s %10s %7s\n", "size(B)", "count", "type", "iters",
               "time(us)", "algbw", "busbw", "#wrong");
  std::fprintf(out, "# %12s %12s %6s %8s %12s %10s %10s %7s\n", "", "(elements)", "", "", "",
               "(GB/s)", "(GB/s)", "");
  std::fflush(out);
}

void print_row(FILE* out, const Row& r) {
  std::string wrong = r.wrong < 0 ? "N/A" : std::to_string(r.wrong);
  std::fprintf(out, "  %12lld %12lld %6s %8lld %12.2f %10.3f %10.3f %7s\n",
               static_cast<long long>(r.bytes), static_cast<long long>(r.count), "float",
               static_cast<long long>(r.iters), r.time_us, r.algbw_gbs, r.busbw_gbs, wrong.c_str());
  std::fflush(out);
}

std::string json_row(const Row& r, const Config& cfg) {
  Json j = {{"collective", comm::coll_op_name(r.collective)},
            {"world", r.world},
            {"transport", r.transport},
            {"device", cfg.device},
            {"backend", cfg.backend}};
  if (cfg.cuda() && cfg.backend == "ring") j["ring_transport"] = cfg.ring_transport;
  j.update({{"op", comm::reduce_op_name(cfg.op)},
            {"bytes", r.bytes},
            {"count", r.count},
            {"iters", r.iters},
            {"time_us", r.time_us},
            {"algbw_gbs", r.algbw_gbs},
            {"busbw_gbs", r.busbw_gbs},
            {"wrong", r.wrong < 0 ? Json(nullptr) : Json(r.wrong)}});
  return dump_json(j);
}

}  // namespace engine::allreduce_bench
