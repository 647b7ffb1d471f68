// apps/allreduce_bench/runner.cpp: nccl-tests' loop. The time of a size is the slowest rank's
// mean over the timed calls (a barrier lines the ranks up first; on a CUDA device the clock is
// read after the device has finished them); algbw = bytes / time, busbw = algbw * the
// collective's factor.
#include "apps/allreduce_bench/runner.h"

#include <chrono>

#include "apps/allreduce_bench/collective.h"

namespace engine::allreduce_bench {

namespace {

std::string plain_label(CollOp c, comm::Algo a) {
  if (c == CollOp::AllReduce) return comm::algo_name(a);
  if (c == CollOp::Broadcast || c == CollOp::Reduce)
    return a == comm::Algo::Tree ? "tree" : "chain";
  return "ring";
}

// Times one placement: warm-up, a barrier, the timed calls; the slowest rank's mean.
Timing time_placement(comm::Communicator& comm, CollectiveRun& run, const Config& cfg,
                      const Row& row) {
  Timing t;
  if (cfg.check) {
    int64_t wrong = run.check();
    comm.all_reduce(&wrong, 1, DType::I64, comm::ReduceOp::Sum);
    t.wrong = wrong;
  }
  for (int64_t i = 0; i < cfg.warmup; ++i) run.run();
  run.finish();
  comm.barrier();
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < row.iters; ++i) run.run();
  run.finish();
  int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  comm.all_reduce(&ns, 1, DType::I64, comm::ReduceOp::Max);
  const double seconds = double(ns) * 1e-9 / double(row.iters);
  t.time_us = seconds * 1e6;
  t.algbw_gbs = double(row.bytes) / seconds * 1e-9;
  t.busbw_gbs = t.algbw_gbs * busbw_factor(row.collective, row.world);
  return t;
}

}  // namespace

std::string algo_label(CollOp c, comm::Algo algo, int64_t nbytes, int world) {
  if (c == CollOp::ChunkTree) return "chunk_tree";  // one algorithm; --algo does not apply
  if (algo != comm::Algo::Auto) return plain_label(c, algo);
  const auto n = static_cast<size_t>(nbytes);
  if (c == CollOp::AllReduce) return "auto:" + plain_label(c, comm::auto_all_reduce(n, world));
  if (c == CollOp::Broadcast || c == CollOp::Reduce)
    return "auto:" + plain_label(c, comm::auto_rooted(n, world));
  return "auto:ring";
}

void run_rank(comm::Communicator& comm, const Config& cfg,
              const std::function<void(CollOp)>& on_table,
              const std::function<void(const Row&)>& on_row, const Backend& backend) {
  const int world = comm.size();
  for (CollOp c : cfg.collectives) {
    if (comm.rank() == 0) on_table(c);
    for (int64_t nbytes : cfg.sizes())
      for (comm::Algo algo : cfg.algos_for(c)) {
        Row row;
        row.collective = c;
        row.world = world;
        row.transport = backend.nccl                ? std::string("nccl")
                        : comm.host_path() == "mpi" ? std::string("mpi")
                                                    : comm.transport_kind();
        row.dtype = cfg.dtype;
        row.op = cfg.op;
        row.count = total_count(c, nbytes, world, cfg.dtype);
        row.bytes = row.count * static_cast<int64_t>(dtype_size(cfg.dtype));
        row.iters = cfg.iters_for(nbytes);
        row.algo = cfg.ours() ? algo_label(c, algo, row.bytes, world) : row.transport;
        comm.set_algo(algo);
        CollectiveRun run(c, comm, row.count, cfg.op, backend, cfg.dtype);
        run.set_in_place(false);
        row.oop = time_placement(comm, run, cfg, row);
        run.set_in_place(true);
        row.ip = time_placement(comm, run, cfg, row);
        comm.set_algo(comm::Algo::Auto);
        if (comm.rank() == 0) on_row(row);
      }
  }
}

}  // namespace engine::allreduce_bench
