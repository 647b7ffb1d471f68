// tests/comm/test_allreduce_bench.cpp: the allreduce_bench program over the real transports, as
// processes: every collective checked (values unique to rank and position) with no wrong element,
// one JSON object per row with nccl-tests' keys. With --device cuda: exit code 2 and one line when
// no CUDA device answers; with one, the same clean checks on GPU buffers through the ring (staged
// and CUDA IPC) and NCCL. Skipped when the program is not built.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "comm/backends/cuda_ipc/cuda_ipc_ring.h"
#include "core/device.h"
#include "io/json.h"
#include "tests/common/run.h"
#include "tests/common/temp_dir.h"

namespace {

const std::string kBench = std::string(ENGINE_BUILD_DIR) + "/apps/allreduce_bench";

struct BenchRun {
  int code = -1;
  std::string out;
  std::vector<engine::Json> json;  // the --json rows, each parsed
};

BenchRun run_bench(const std::string& args, const std::string& tag) {
  BenchRun r;
  const engine::testing::TempDir dir;
  const std::string json = dir.file("allreduce_bench_" + tag + ".jsonl");
  const engine::testing::RunResult run =
      engine::testing::run(kBench + " " + args + " --json " + json);
  r.code = run.code;
  r.out = run.output;
  std::ifstream f(json);
  for (std::string line; std::getline(f, line);) r.json.push_back(engine::parse_json(line, json));
  return r;
}

class AllreduceBench : public ::testing::TestWithParam<std::pair<const char*, int>> {};

TEST_P(AllreduceBench, EveryCollectiveChecksClean) {
  if (access(kBench.c_str(), X_OK) != 0) GTEST_SKIP() << kBench << " is not built";
  const auto [transport, world] = GetParam();
  const std::string tag = std::string(transport) + std::to_string(world);
  BenchRun r = run_bench("--world-size " + std::to_string(world) + " --transport " + transport +
                             " --collective all --min-bytes 4 --max-bytes 256K --step-factor 8" +
                             " --iters 3 --warmup 1 --timeout 60",
                         tag);
  ASSERT_EQ(r.code, 0) << r.out;
  // Sizes 4, 32, ..., 128K (counts 1 .. 32768, 0 for all_gather and reduce_scatter at W=3):
  // 6 rows per collective, 5 collectives.
  ASSERT_EQ(r.json.size(), 30u) << r.out;
  for (const engine::Json& row : r.json) {
    for (const char* key : {"bytes", "count", "time_us", "algbw_gbs", "busbw_gbs"})
      EXPECT_TRUE(row.contains(key) && row.at(key).is_number()) << key << " missing in " << row;
    EXPECT_EQ(row.value("wrong", engine::Json()), 0) << row;
    const std::string kind = world == 1 ? "self" : transport;  // one rank talks to nobody
    EXPECT_EQ(row.value("transport", ""), kind) << row;
    EXPECT_EQ(row.value("device", ""), "cpu") << row;
    EXPECT_EQ(row.value("backend", ""), "ring") << row;
  }
  EXPECT_EQ(r.out.find("# device"), std::string::npos) << "no device line on the host:\n" << r.out;
  for (const char* table :
       {"# all_reduce,", "# broadcast,", "# reduce,", "# all_gather,", "# reduce_scatter,"})
    EXPECT_NE(r.out.find(table), std::string::npos) << table << " table missing:\n" << r.out;
}

INSTANTIATE_TEST_SUITE_P(Transports, AllreduceBench,
                         ::testing::Values(std::make_pair("tcp", 2), std::make_pair("shm", 3),
                                           std::make_pair("shm", 1)),
                         [](const auto& p) {
                           return std::string(p.param.first) + "_W" +
                                  std::to_string(p.param.second);
                         });

// Every dtype and op, every algorithm side by side, out of place and in place: #wrong 0 in every
// row of both placements, the algorithm named in each row.
TEST(AllreduceBench, EveryDtypeOpAndAlgorithmChecksClean) {
  if (access(kBench.c_str(), X_OK) != 0) GTEST_SKIP() << kBench << " is not built";
  for (const char* dtype : {"float32", "bfloat16", "float16", "int32", "int64", "uint8"})
    for (const char* op : {"sum", "prod", "max", "min", "avg"}) {
      const bool floating = std::string(dtype).find("float") != std::string::npos;
      if (!floating && std::string(op) == "avg") continue;
      const std::string what = std::string(dtype) + " " + op;
      BenchRun r =
          run_bench(std::string("--world-size 3 --transport shm --collective all ") +
                        "--min-bytes 6 --max-bytes 6K --step-factor 32 --iters 1 " +
                        "--warmup 0 --timeout 60 --algo all --dtype " + dtype + " --op " + op,
                    std::string(dtype) + op);
      ASSERT_EQ(r.code, 0) << what << "\n" << r.out;
      // 3 sizes; all_reduce 5 algorithms, broadcast and reduce 3, the others 1: 13 per size.
      ASSERT_EQ(r.json.size(), 39u) << what << "\n" << r.out;
      for (const engine::Json& row : r.json) {
        for (const char* key : {"wrong", "oop_wrong", "ip_wrong"})
          EXPECT_EQ(row.value(key, engine::Json()), 0) << what << ": " << key << " in " << row;
        for (const char* key : {"oop_time_us", "oop_busbw_gbs", "ip_time_us", "ip_busbw_gbs"})
          EXPECT_TRUE(row.contains(key) && row.at(key).is_number()) << key << " in " << row;
        EXPECT_EQ(row.value("dtype", ""), dtype) << row;
        EXPECT_FALSE(row.value("algo", "").empty()) << row;
      }
      EXPECT_NE(r.out.find("# all_reduce side by side"), std::string::npos) << r.out;
      EXPECT_NE(r.out.find("out-of-place"), std::string::npos) << r.out;
    }
}

// all_to_all at W = 3 (chunks of 0 elements at the smallest size); --two-level on with every
// forked rank on one host stays flat and says nothing (two hosts: tests/comm/test_groups.cpp).
TEST(AllreduceBench, AllToAllChecksCleanAndTwoLevelIsAChoice) {
  if (access(kBench.c_str(), X_OK) != 0) GTEST_SKIP() << kBench << " is not built";
  BenchRun r = run_bench(
      "--world-size 3 --collective all_to_all --min-bytes 4 --max-bytes 1M "
      "--step-factor 16 --iters 3 --warmup 1 --timeout 60",
      "a2a");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("# all_to_all, n = 3, busbw = algbw * (n-1)/n"), std::string::npos) << r.out;
  ASSERT_EQ(r.json.size(), 5u) << r.out;  // 4 B .. 256 KiB
  for (const auto& row : r.json) EXPECT_EQ(row.value("wrong", engine::Json()), 0) << row;
  r = run_bench("--world-size 2 --two-level on --max-bytes 1K --iters 2 --warmup 1", "two_on");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("two levels"), std::string::npos) << r.out;
}

// The fixed chunk tree, one chunk per rank, at W = 3 (slices of 0 elements at the smallest size);
// it sums only and has one algorithm.
TEST(AllreduceBench, ChunkTreeChecksClean) {
  if (access(kBench.c_str(), X_OK) != 0) GTEST_SKIP() << kBench << " is not built";
  BenchRun r = run_bench(
      "--world-size 3 --collective chunk_tree_all_reduce --min-bytes 4 --max-bytes 1M "
      "--step-factor 16 --iters 3 --warmup 1 --timeout 60",
      "chunk_tree");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("# chunk_tree_all_reduce, n = 3, busbw = algbw * 2(n-1)/n"),
            std::string::npos)
      << r.out;
  ASSERT_EQ(r.json.size(), 5u) << r.out;  // 4 B .. 256 KiB
  for (const auto& row : r.json) {
    EXPECT_EQ(row.value("wrong", engine::Json()), 0) << row;
    EXPECT_EQ(row.value("algo", ""), "chunk_tree") << row;
  }
  r = run_bench("--world-size 2 --collective chunk_tree_all_reduce --op max", "chunk_tree_max");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--op sum only"), std::string::npos) << r.out;
  r = run_bench("--world-size 2 --collective chunk_tree_all_reduce --algo ring", "chunk_tree_algo");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--algo does not apply"), std::string::npos) << r.out;
}

TEST(AllreduceBenchFlags, BadFlagsFailWithAMessage) {
  if (access(kBench.c_str(), X_OK) != 0) GTEST_SKIP() << kBench << " is not built";
  BenchRun r = run_bench("--world-size 2 --collective all_to_some", "bad");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("all_to_some"), std::string::npos) << r.out;
  r = run_bench("--world-size 2 --collective all_to_all --device cuda", "a2a_cuda");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--collective all_to_all runs on host buffers"), std::string::npos) << r.out;
  r = run_bench("--world-size 2 --two-level sometimes", "bad_two_level");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("two-level"), std::string::npos) << r.out;
  r = run_bench("--world-size 2 --backend nccl", "nccl_on_cpu");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--backend nccl needs --device cuda"), std::string::npos) << r.out;
  r = run_bench("--world-size 2 --ring-transport ipc", "ipc_on_cpu");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--ring-transport"), std::string::npos) << r.out;
  r = run_bench("--world-size 2 --cuda-ring-protocol ll", "protocol_on_cpu");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--cuda-ring-protocol applies to --device cuda --ring-transport ipc"),
            std::string::npos)
      << r.out;
  r = run_bench("--world-size 2 --cuda-ring-protocol events", "events_on_cpu");  // a choice
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--cuda-ring-protocol applies to --device cuda --ring-transport ipc"),
            std::string::npos)
      << r.out;
  r = run_bench("--world-size 2 --device cuda --cuda-ring-protocol lowlat", "bad_protocol");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--cuda-ring-protocol"), std::string::npos) << r.out;
  // Retired: the blocking IPC kernel and the staged pipeline.
  r = run_bench("--world-size 2 --device cuda --cuda-ring-protocol blocking", "retired_blocking");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("blocking"), std::string::npos) << r.out;
  r = run_bench("--world-size 2 --device cuda --staged-pipeline 3", "retired_pipeline");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("staged-pipeline"), std::string::npos) << r.out;
  r = run_bench("--world-size 2 --cuda-ring-channels 16", "channels_on_cpu");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--cuda-ring-channels applies to --device cuda --ring-transport ipc"),
            std::string::npos)
      << r.out;
  r = run_bench("--world-size 2 --device cuda --cuda-ring-slot-bytes 512K", "slot_bytes_staged");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--cuda-ring-slot-bytes applies to --device cuda --ring-transport ipc"),
            std::string::npos)
      << r.out;
  const std::string ipc = "--world-size 2 --device cuda --ring-transport ipc ";
  r = run_bench(ipc + "--cuda-ring-channels 33", "too_many_channels");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--cuda-ring-channels must be 0..32"), std::string::npos) << r.out;
  r = run_bench(ipc + "--cuda-ring-channels -1", "negative_channels");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--cuda-ring-channels"), std::string::npos) << r.out;
  r = run_bench(ipc + "--cuda-ring-slot-bytes 1000", "unaligned_slot");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--cuda-ring-slot-bytes must be a multiple of 16"), std::string::npos)
      << r.out;
  r = run_bench(ipc + "--cuda-ring-slot-bytes 1G", "huge_slot");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--cuda-ring-slot-bytes must be a multiple of 16 up to 64M"),
            std::string::npos)
      << r.out;
  r = run_bench(ipc + "--cuda-ring-slot-bytes lots", "bad_slot");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--cuda-ring-slot-bytes"), std::string::npos) << r.out;
  r = run_bench("--world-size 2 --dtype int32 --op avg", "avg_int");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--op avg needs a floating --dtype"), std::string::npos) << r.out;
  r = run_bench("--world-size 2 --dtype float64", "bad_dtype");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--dtype"), std::string::npos) << r.out;
  r = run_bench("--world-size 2 --algo bcube", "bad_algo");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--algo"), std::string::npos) << r.out;
  r = run_bench("--world-size 2 --device tpu", "bad_device");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("tpu"), std::string::npos) << r.out;
}

TEST(AllreduceBenchCuda, WithoutADeviceExitsTwoWithOneLine) {
  if (access(kBench.c_str(), X_OK) != 0) GTEST_SKIP() << kBench << " is not built";
  if (engine::cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device answers here";
  for (const char* args :
       {"--world-size 2 --device cuda", "--world-size 2 --device cuda --backend nccl",
        "--world-size 1 --device=cuda --ring-transport ipc",
        "--device cuda --init-method tcp://127.0.0.1:1"}) {
    BenchRun r = run_bench(args, "nodev");
    EXPECT_EQ(r.code, 2) << args << ":\n" << r.out;
    EXPECT_EQ(r.out.rfind("allreduce_bench: no CUDA device: ", 0), 0u) << args << ":\n" << r.out;
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << args << ": not one line:\n" << r.out;
    EXPECT_TRUE(r.json.empty()) << args;
  }
}

// (backend, ring transport or "", world, the IPC ring's protocol or ""): GPU buffers, every
// collective checked.
struct CudaCase {
  const char* backend;
  const char* ring_transport;
  int world;
  const char* protocol = "";
};

class AllreduceBenchCudaRun : public ::testing::TestWithParam<CudaCase> {};

TEST_P(AllreduceBenchCudaRun, EveryCollectiveChecksClean) {
  if (access(kBench.c_str(), X_OK) != 0) GTEST_SKIP() << kBench << " is not built";
  const int devices = engine::cuda_device_count();
  if (devices == 0) GTEST_SKIP() << engine::cuda_unavailable_reason();
  const CudaCase c = GetParam();
  const bool nccl = std::string(c.backend) == "nccl";
  // NCCL wants a GPU per rank; the IPC ring needs what CUDA IPC needs.
  const int world = nccl ? std::min(c.world, devices) : c.world;
  if (*c.ring_transport && std::string(c.ring_transport) == "ipc") {
    const std::string why = engine::comm::CudaIpcRing::unsupported_reason(0);
    if (!why.empty()) GTEST_SKIP() << why;
  }
  std::string args = "--device cuda --backend " + std::string(c.backend) + " --world-size " +
                     std::to_string(world) +
                     " --collective all --min-bytes 4 --max-bytes 256K --step-factor 8" +
                     " --iters 3 --warmup 1 --timeout 60";
  if (*c.ring_transport) args += " --ring-transport " + std::string(c.ring_transport);
  if (*c.protocol) args += " --cuda-ring-protocol " + std::string(c.protocol);
  BenchRun r = run_bench(args, std::string("cuda_") + c.backend + c.ring_transport + c.protocol);
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_EQ(r.json.size(), 30u) << r.out;
  for (const engine::Json& row : r.json) {
    EXPECT_EQ(row.value("wrong", engine::Json()), 0) << row;
    EXPECT_EQ(row.value("device", ""), "cuda") << row;
    EXPECT_EQ(row.value("backend", ""), c.backend) << row;
    if (*c.protocol && row.value("collective", "") == "all_reduce") {
      EXPECT_EQ(row.value("protocol", ""), c.protocol) << row;
      EXPECT_TRUE(row.value("mode", "") == "concurrent" || row.value("mode", "") == "time-sliced")
          << row;
      // Auto never spins across time-sliced contexts: it runs the event-chained ring there.
      if (std::string(c.protocol) == "auto" && row.value("mode", "") == "time-sliced") {
        EXPECT_EQ(row.value("protocol_ran", ""), "events") << row;
      }
      EXPECT_GT(row.value("channels", int64_t(0)), 0) << row;
      EXPECT_GT(row.value("slot_bytes", int64_t(0)), 0) << row;
    }
  }
  EXPECT_NE(r.out.find("# device cuda: "), std::string::npos) << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    Backends, AllreduceBenchCudaRun,
    ::testing::Values(CudaCase{"ring", "", 2}, CudaCase{"ring", "ipc", 2}, CudaCase{"nccl", "", 2},
                      CudaCase{"ring", "ipc", 2, "ll"}, CudaCase{"ring", "ipc", 2, "simple"},
                      CudaCase{"ring", "ipc", 3, "auto"}, CudaCase{"ring", "ipc", 2, "events"}),
    [](const auto& p) {
      return std::string(p.param.backend) +
             (*p.param.ring_transport ? std::string("_") + p.param.ring_transport : std::string()) +
             (*p.param.protocol ? std::string("_") + p.param.protocol : std::string()) + "_W" +
             std::to_string(p.param.world);
    });

}  // namespace
