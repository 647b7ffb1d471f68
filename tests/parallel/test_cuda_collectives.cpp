// tests/parallel/test_cuda_collectives.cpp: the choice of CUDA collective backends
// (parallel/cuda_collectives.h) where no GPU takes part: ranks on the CPU need nothing attached,
// and NCCL on the CPU is refused on every rank with its cause.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "parallel/cuda_collectives.h"
#include "tests/parallel/parallel_test_util.h"

namespace engine::parallel {
namespace {

TEST(CudaCollectives, RanksOnTheCpuAttachNothing) {
  constexpr int kWorld = 2;
  auto comms = comm::make_mem_communicators(kWorld);
  std::vector<std::string> chose(kWorld, "unset");
  testing::expect_no_errors(testing::run_threads(kWorld, [&](int r) {
    CudaCollectiveOptions o;
    o.cuda_ring = r == 0 ? CudaRing::Auto : CudaRing::Staged;  // not used on the CPU
    chose[r] = attach_cuda_collectives(o, *comms[r], Device::cpu());
  }));
  EXPECT_EQ(chose, (std::vector<std::string>{"", ""}));
}

TEST(CudaCollectives, NcclOnTheCpuIsRefusedOnEveryRank) {
  constexpr int kWorld = 2;
  auto comms = comm::make_mem_communicators(kWorld);
  std::vector<int> why(kWorld, -1);
  testing::expect_no_errors(testing::run_threads(kWorld, [&](int r) {
    CudaCollectiveOptions o;
    o.backend = CollectiveBackend::Nccl;
    try {
      attach_cuda_collectives(o, *comms[r], Device::cpu());
    } catch (const CollectivesRefused& e) {
      why[r] = static_cast<int>(e.why);
      EXPECT_NE(std::string(e.what()).find("NCCL reduces CUDA tensors and this rank trains on "
                                           "the cpu ("),
                std::string::npos)
          << e.what();
      EXPECT_FALSE(e.detail.empty());
    }
  }));
  for (int r = 0; r < kWorld; ++r)
    EXPECT_EQ(why[r], static_cast<int>(CollectivesRefused::Why::NcclOnCpu)) << "rank " << r;
}

}  // namespace
}  // namespace engine::parallel
