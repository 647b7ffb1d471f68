// apps/allreduce_bench_main.cpp: nccl-tests for our collectives. Forks --world-size ranks on this
// host (meeting at tcp://127.0.0.1:<free port>), or joins ranks started by `launch` (env://);
// rank 0 prints one table per collective and, with --json, one JSON object per row.
#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include "apps/allreduce_bench/config.h"
#include "apps/allreduce_bench/report.h"
#include "apps/allreduce_bench/runner.h"
#include "apps/allreduce_bench/spawn.h"
#include "comm/rendezvous.h"
#include "comm/socket.h"

namespace {

using engine::allreduce_bench::Collective;
using engine::allreduce_bench::Config;
using engine::allreduce_bench::Row;

// One rank: connect, run, report. Returns the exit code.
int rank_main(const Config& cfg, engine::comm::InitOptions init, int forked_rank) {
  namespace ab = engine::allreduce_bench;
  try {
    auto comm = engine::comm::init_communicator(init);
    if (cfg.segment_bytes > 0) comm->set_segment_bytes(static_cast<size_t>(cfg.segment_bytes));
    std::unique_ptr<FILE, int (*)(FILE*)> json(nullptr, fclose);
    FILE* table = stdout;
    if (comm->rank() == 0 && !cfg.json_path.empty()) {
      if (cfg.json_path == "-") {
        table = stderr;  // stdout carries the JSON rows alone
      } else {
        json.reset(std::fopen(cfg.json_path.c_str(), "w"));
        if (!json) throw engine::Error("--json: cannot write " + cfg.json_path);
      }
    }
    FILE* json_out = cfg.json_path == "-" ? stdout : json.get();
    if (comm->rank() == 0)
      ab::print_preamble(table, cfg, comm->size(), comm->transport_kind(), comm->segment_bytes());
    ab::run_rank(
        *comm, cfg, [&](Collective c) { ab::print_table_header(table, c, comm->size()); },
        [&](const Row& row) {
          ab::print_row(table, row);
          if (json_out) {
            std::fprintf(json_out, "%s\n", ab::json_row(row, cfg).c_str());
            std::fflush(json_out);
          }
        });
    comm->barrier();
    return 0;
  } catch (const std::exception& e) {
    std::string who = forked_rank >= 0 ? " [rank " + std::to_string(forked_rank) + "]" : "";
    std::fprintf(stderr, "allreduce_bench%s: %s\n", who.c_str(), e.what());
    return 1;
  }
}

int run(int argc, char** argv) {
  Config cfg;
  if (!engine::allreduce_bench::parse_flags(argc, argv, &cfg)) return 0;
  engine::comm::InitOptions init;
  init.init_method = cfg.init_method;
  init.connect.transport = cfg.transport;
  init.connect.timeout = engine::comm::Millis(cfg.timeout_s * 1000);
  if (cfg.world_size == 0) return rank_main(cfg, init, -1);

  // Forked ranks meet at a store that rank 0 serves on a port that was free a moment ago.
  const int port = engine::comm::listen_tcp("127.0.0.1", 0, "free port probe").local_port();
  init.init_method = "tcp://127.0.0.1:" + std::to_string(port);
  init.world_size = cfg.world_size;
  init.connect.bind_address = "127.0.0.1";
  return engine::allreduce_bench::spawn_ranks(cfg.world_size, [&](int r) {
    engine::comm::InitOptions mine = init;
    mine.rank = r;
    return rank_main(cfg, mine, r);
  });
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allreduce_bench: %s\n", e.what());
    return 2;
  }
}
