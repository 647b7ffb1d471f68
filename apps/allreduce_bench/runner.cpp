// apps/allreduce_bench/runner.cpp: nccl-tests' loop. The time of a size is the slowest rank's
// mean over the timed calls (a barrier lines the ranks up first; on a CUDA device the clock is
// read after the device has finished them); algbw = bytes / time, busbw = algbw * the
// collective's factor.
#include "apps/allreduce_bench/runner.h"

#include <chrono>

#include "apps/allreduce_bench/collective.h"

namespace engine::allreduce_bench {

void run_rank(comm::Communicator& comm, const Config& cfg,
              const std::function<void(CollOp)>& on_table,
              const std::function<void(const Row&)>& on_row, const Backend& backend) {
  const int world = comm.size();
  for (CollOp c : cfg.collectives) {
    if (comm.rank() == 0) on_table(c);
    for (int64_t nbytes : cfg.sizes()) {
      Row row;
      row.collective = c;
      row.world = world;
      row.transport = backend.nccl                ? std::string("nccl")
                      : comm.host_path() == "mpi" ? std::string("mpi")
                                                  : comm.transport_kind();
      row.count = total_count(c, nbytes, world);
      row.bytes = row.count * 4;
      row.iters = cfg.iters_for(nbytes);
      CollectiveRun run(c, comm, row.count, cfg.op, backend);

      if (cfg.check) {
        int64_t wrong = run.check();
        comm.all_reduce(&wrong, 1, DType::I64, comm::ReduceOp::Sum);
        row.wrong = wrong;
      }
      for (int64_t i = 0; i < cfg.warmup; ++i) run.run();
      run.finish();
      comm.barrier();
      auto t0 = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < row.iters; ++i) run.run();
      run.finish();
      int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now() - t0)
                       .count();
      comm.all_reduce(&ns, 1, DType::I64, comm::ReduceOp::Max);

      const double seconds = double(ns) * 1e-9 / double(row.iters);
      row.time_us = seconds * 1e6;
      row.algbw_gbs = double(row.bytes) / seconds * 1e-9;
      row.busbw_gbs = row.algbw_gbs * busbw_factor(c, world);
      if (comm.rank() == 0) on_row(row);
    }
  }
}

}  // namespace engine::allreduce_bench
