// apps/allreduce_bench/report.h: owns allreduce_bench's output: nccl-tests' table and one JSON
// object per row (keys bytes, count, time_us, algbw_gbs, busbw_gbs, wrong - in place for
// all_reduce, broadcast and reduce, out of place for all_gather and reduce_scatter, as before the
// pair -, oop_time_us, oop_algbw_gbs, oop_busbw_gbs, oop_wrong and the ip_ ones for both
// placements, and the context: collective, world, transport, device, backend, [ring_transport,]
// op, dtype, algo, iters).
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "apps/allreduce_bench/config.h"
#include "apps/allreduce_bench/runner.h"

namespace engine::allreduce_bench {

// "# ..." lines: world, how the ranks met, transport, op, iterations, load average.
void print_preamble(FILE* out, const Config& cfg, int world, const std::string& transport,
                    size_t segment_bytes);
// "# device ..., backend ..." (printed after the preamble with --device cuda): which GPUs, what
// moves the data, and what the host transport above is still used for.
void print_device_line(FILE* out, const Config& cfg, const std::string& devices,
                       const std::string& backend);
void print_table_header(FILE* out, CollOp c, int world);
void print_row(FILE* out, const Row& row);
// --algo all: one line per size, each algorithm's out-of-place time and busbw beside the others.
void print_side_by_side(FILE* out, const std::vector<Row>& rows);
// `mode`: the CUDA IPC ring's ("concurrent" or "time-sliced"; "" when it does not run).
std::string json_row(const Row& row, const Config& cfg, const std::string& mode = "");

}  // namespace engine::allreduce_bench
