// tests/apps/test_mpirun.cpp: `train` and `allreduce_bench` started by a real Open MPI mpirun
// with no other variable: the ranks meet through MPI; 2 and 3 ranks end where 1 ends (max
// relative difference <= 1e-5, as under launch) with our ring and with --backend mpi in every
// --sync; a stopped rank ends the job at --timeout (the watchdog), naming the MPI call;
// allreduce_bench --backend mpi checks every collective clean. Without MPI in the build, mpirun
// gets one error saying what to set or how to build. Skipped when mpirun is missing.
#include <chrono>
#include <string>
#include <tuple>

#include "comm/backends/mpi/mpi_world.h"
#include "io/json.h"
#include "tests/apps/train_fixture.h"
#include "tests/common/mpirun.h"

using namespace engine;
using namespace engine::testing;

namespace {

#define SKIP_WITHOUT_MPI()                                                         \
  do {                                                                             \
    if (!have_mpirun()) GTEST_SKIP() << "mpirun is missing (Debian: openmpi-bin)"; \
    if (!comm::mpi_built()) GTEST_SKIP() << comm::mpi_build_hint();                \
  } while (0)

// 576 training images: whole batches of 96 for 1, 2 and 3 ranks (no padded or partial batch).
class Mpirun : public TrainTest {
 protected:
  void SetUp() override {
    data_ = (dir_ / "data576").string();
    write_dataset(data_, 576, 100);
  }
  std::string args() const {
    return " --model linear --dropout 0 --sharding sampler --shuffle off --batch-size 96 "
           "--steps 20 --epochs 5 --threads 1 --data-dir " +
           data_;
  }
};

}  // namespace

class MpirunLikeOne
    : public Mpirun,
      public ::testing::WithParamInterface<std::tuple<int, std::string, std::string>> {};

TEST_P(MpirunLikeOne, EndsWhereOneRankEnds) {
  SKIP_WITHOUT_MPI();
  const auto [np, backend, sync] = GetParam();
  RunResult one = run(kTrain + args() + " --save " + path("one.safetensors"));
  ASSERT_EQ(one.code, 0) << one.output;
  RunResult many = run(mpirun_command(np) + " " + kTrain + args() + " --backend " + backend +
                       " --sync " + sync + " --timeout 60 --save " + path("many.safetensors"));
  ASSERT_EQ(many.code, 0) << many.output;
  const std::string world = "World " + std::to_string(np) + ": ";
  EXPECT_NE(many.output.find(world + (backend == "mpi" ? "mpi (Open MPI" : "ring over shm")),
            std::string::npos)
      << many.output;
  EXPECT_LT(max_rel_diff(path("one.safetensors"), path("many.safetensors")), 1e-5);
  // Open MPI gives each rank a pseudo-terminal: rank 0 draws its bar there, each epoch's ending
  // with its last batch (6 a rank, then 2 for --steps 20), and no empty line follows "World".
  EXPECT_NE(many.output.find(" 6/6 "), std::string::npos) << many.output;
  EXPECT_NE(many.output.find(" 2/2 "), std::string::npos) << many.output;
  EXPECT_EQ(many.output.find("\n\n"), std::string::npos) << many.output;
  EXPECT_EQ(many.output.find("\n\r\n"), std::string::npos) << many.output;
}

INSTANTIATE_TEST_SUITE_P(Train, MpirunLikeOne,
                         ::testing::Values(std::make_tuple(2, "ring", "bucketed"),
                                           std::make_tuple(3, "ring", "bucketed"),
                                           std::make_tuple(2, "mpi", "bucketed"),
                                           std::make_tuple(2, "mpi", "allreduce"),
                                           std::make_tuple(2, "mpi", "reduce-broadcast"),
                                           std::make_tuple(3, "mpi", "bucketed"),
                                           std::make_tuple(3, "mpi", "reduce-broadcast")),
                         [](const auto& info) {
                           std::string s = "np" + std::to_string(std::get<0>(info.param)) + "_" +
                                           std::get<1>(info.param) + "_" + std::get<2>(info.param);
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

// --world-invariant under plain mpirun with --backend mpi: the same bytes as one process (the
// chunk tree on the engine's own transport, every other collective through MPI).
TEST_F(Mpirun, WorldInvariantWithBackendMpiSavesOneProcesssBytes) {
  SKIP_WITHOUT_MPI();
  const std::string wi =
      " --model linear --world-invariant --batch-size 96 --steps 8 --epochs 2 "
      "--threads 1 --timeout 60 --data-dir " +
      data_;
  RunResult one = run(kTrain + wi + " --save " + path("one.safetensors"));
  ASSERT_EQ(one.code, 0) << one.output;
  RunResult three = run(mpirun_command(3) + " " + kTrain + wi + " --backend mpi --save " +
                        path("mpi.safetensors"));
  ASSERT_EQ(three.code, 0) << three.output;
  EXPECT_NE(three.output.find("World 3: mpi (Open MPI"), std::string::npos) << three.output;
  expect_same_bits(path("one.safetensors"), path("mpi.safetensors"));
}

TEST_F(Mpirun, AStoppedRankEndsTheJobAtTheTimeoutNamingTheMpiCall) {
  SKIP_WITHOUT_MPI();
  // Rank 1 is stopped (SIGSTOP) once rank 0 has trained a few batches; rank 0 then waits in
  // MPI_Allreduce, which has no time limit of its own: the watchdog ends the job after --timeout.
  const std::string train =
      kTrain + " --model linear --epochs 1000 --threads 1 --backend mpi --timeout 2 --data-dir " +
      data_;
  const std::string out0 = path("out0");
  const std::string script = path("ranks.sh");
  std::ofstream(script) << "if [ \"$OMPI_COMM_WORLD_RANK\" = 0 ]; then exec " << train << " > "
                        << out0 << " 2>&1; fi\n"
                        << train << " & p=$!\n"
                        << "i=0; until grep -q 'epoch 0, batch' " << out0
                        << "; do i=$((i+1)); if [ $i -gt 400 ]; then echo rank0-never-trained; "
                           "break; fi; sleep 0.05; done\n"
                        << "kill -STOP $p; wait $p\n";
  const auto t0 = std::chrono::steady_clock::now();
  RunResult r = run(mpirun_command(2) + " sh " + script + "; echo mpirun-exit=$?; cat " + out0);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.output.find("rank0-never-trained"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("mpirun-exit=0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 0: MPI_Allreduce"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("did not finish within its timeout of 2 s"), std::string::npos)
      << r.output;
  EXPECT_LT(s, 30) << r.output;
}

TEST_F(Mpirun, AFailingRankEndsTheJobAtOnce) {
  SKIP_WITHOUT_MPI();
  // Rank 1 cannot read its data: it says so and MPI_Abort ends rank 0 too (no wait for --timeout).
  const std::string script = path("ranks.sh");
  std::ofstream(script) << "d=" << data_
                        << "; [ \"$OMPI_COMM_WORLD_RANK\" = 1 ] && d=/nonexistent\n"
                        << "exec " << kTrain
                        << " --model linear --epochs 100 --threads 1 --backend mpi --timeout 200 "
                           "--data-dir $d\n";
  const auto t0 = std::chrono::steady_clock::now();
  RunResult r = run(mpirun_command(2) + " sh " + script);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("/nonexistent: missing MNIST file"), std::string::npos) << r.output;
  EXPECT_LT(s, 60) << r.output;
}

TEST_F(Mpirun, BackendMpiNeedsRanksStartedByMpirun) {
  if (!comm::mpi_built()) {
    RunResult r = run(kTrain + " --backend mpi --data-dir " + data_);
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_NE(r.output.find("-DENGINE_MPI=ON"), std::string::npos) << r.output;
    return;
  }
  RunResult r = run(kLaunchBin + " --nproc-per-node 2 --master-port " + std::to_string(port()) +
                    " -- " + kTrain + " --model linear --steps 2 --threads 1 --backend mpi " +
                    "--timeout 30 --data-dir " + data_);
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("not started by mpirun"), std::string::npos) << r.output;
}

TEST_F(Mpirun, WithoutMpiInTheBuildMpirunSaysWhatToSet) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun is missing (Debian: openmpi-bin)";
  if (comm::mpi_built()) GTEST_SKIP() << "this build has MPI: the ranks meet through it";
  RunResult r =
      run(mpirun_command(2) + " " + kTrain + " --model linear --steps 2 --data-dir " + data_);
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("MASTER_ADDR"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("-DENGINE_MPI=ON"), std::string::npos) << r.output;
}

TEST_F(Mpirun, AllreduceBenchWithBackendMpiChecksEveryCollectiveClean) {
  SKIP_WITHOUT_MPI();
  const std::string bench = kBuild + "/apps/allreduce_bench";
  const std::string json = path("rows.jsonl");
  RunResult r = run(mpirun_command(3) + " " + bench +
                    " --backend mpi --collective all --min-bytes 4 --max-bytes 64K "
                    "--step-factor 5 --iters 3 --warmup 1 --timeout 60 --json " +
                    json);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("# device cpu: host memory; backend mpi (Open MPI"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("# reduce_scatter, n = 3"), std::string::npos) << r.output;
  std::ifstream f(json);
  int rows = 0;
  for (std::string line; std::getline(f, line); ++rows) {
    Json row = parse_json(line, json);
    EXPECT_EQ(row.at("wrong").get<int64_t>(), 0) << line;
    EXPECT_EQ(row.at("backend").get<std::string>(), "mpi") << line;
    EXPECT_EQ(row.at("transport").get<std::string>(), "mpi") << line;
  }
  EXPECT_EQ(rows, 5 * 7) << r.output;  // 4, 20, ..., 62500 bytes (counts 1, 5, ..., 15625)
}
