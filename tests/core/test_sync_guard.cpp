// tests/core/test_sync_guard.cpp: ENGINE_SYNC_GUARD's scopes: a host read of a tensor throws
// inside a step scope when the guard is on, and nowhere else.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "core/error.h"
#include "core/sync_guard.h"
#include "core/tensor.h"

namespace engine {
namespace {

class SyncGuard : public ::testing::Test {
 protected:
  void SetUp() override { sync_guard::set_enabled(true); }
  void TearDown() override { sync_guard::set_enabled(false); }
};

TEST_F(SyncGuard, AReadInsideAStepThrowsNamingIt) {
  Tensor t = Tensor::full({1}, 2.f);
  EXPECT_EQ(t.item(), 2.f);  // outside a step: allowed
  sync_guard::StepScope step;
  try {
    (void)t.item();
    FAIL() << "item() inside a step passed";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "host sync inside a training step: Tensor::item() (ENGINE_SYNC_GUARD=1)");
  }
  EXPECT_THROW((void)t.to_vector(), Error);
  EXPECT_THROW((void)Tensor::zeros({2}, DType::I64).to_vector_i64(), Error);
  t.add_(t);  // work on the tensor's device is no read
}

TEST_F(SyncGuard, AllowScopesAndOtherThreadsPass) {
  Tensor t = Tensor::full({1}, 3.f);
  sync_guard::StepScope step;
  {
    sync_guard::Allow allow;
    EXPECT_EQ(t.item(), 3.f);
  }
  float other = 0;
  std::thread([&] { other = t.item(); }).join();  // the scope is the step's thread
  EXPECT_EQ(other, 3.f);
  EXPECT_THROW((void)t.item(), Error);
}

TEST_F(SyncGuard, OffOrOutsideAStepNothingThrows) {
  Tensor t = Tensor::full({1}, 1.f);
  { sync_guard::StepScope step; }
  EXPECT_EQ(t.item(), 1.f);
  sync_guard::set_enabled(false);
  sync_guard::StepScope step;
  EXPECT_EQ(t.item(), 1.f);
}

}  // namespace
}  // namespace engine
