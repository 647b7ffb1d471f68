// Tests of core: tensors, the CPU allocator, the thread pool and the Philox generator.
#include <gtest/gtest.h>

#include <set>

#include "core/allocator.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "tests/common/thread_guard.h"

using namespace engine;

TEST(Tensor, ShapeStridesAndFactories) {
  Tensor t = Tensor::zeros({2, 3, 4});
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.device(), Device::cpu());
  for (float v : t.to_vector()) EXPECT_EQ(v, 0.0f);
  Tensor f = Tensor::full({3}, 2.5f);
  EXPECT_EQ(f.to_vector(), (std::vector<float>{2.5f, 2.5f, 2.5f}));
  EXPECT_EQ(shape_str({2, 3}), "(2, 3)");
  EXPECT_EQ(shape_str({5}), "(5,)");
}

TEST(Tensor, ViewSharesStorageCloneDoesNot) {
  Tensor a = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor v = a.view({3, 2});
  Tensor c = a.clone();
  a.data<float>()[5] = 60;
  EXPECT_EQ(v.to_vector()[5], 60);
  EXPECT_EQ(c.to_vector()[5], 6);
  EXPECT_THROW(a.view({4}), Error);
}

TEST(Tensor, DtypeChecked) {
  Tensor l = Tensor::from_vector_i64({1, 2}, {2});
  EXPECT_EQ(l.data<int64_t>()[1], 2);
  try {
    l.data<float>();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("I64"), std::string::npos);
  }
}

TEST(Tensor, InPlaceOps) {
  Tensor a = Tensor::from_vector({1, 2, 3}, {3});
  Tensor b = Tensor::from_vector({10, 20, 30}, {3});
  a.add_(b, 0.5f);
  EXPECT_EQ(a.to_vector(), (std::vector<float>{6, 12, 18}));
  a.mul_(2);
  EXPECT_EQ(a.to_vector(), (std::vector<float>{12, 24, 36}));
  EXPECT_THROW(a.add_(Tensor::zeros({2})), Error);
}

TEST(Device, Parse) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda:1"), Device::cuda(1));
  EXPECT_EQ(Device::parse("cuda").str(), "cuda:0");
  EXPECT_THROW(Device::parse("gpu"), Error);
  EXPECT_THROW(Device::parse("cuda:x"), Error);
}

TEST(CpuAllocator, ReusesFreedBlocksAndAligns) {
  auto before = cpu_allocator::stats();
  void* p = cpu_allocator::alloc(1000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  cpu_allocator::free(p, 1000);
  void* q = cpu_allocator::alloc(900);  // same size class (1024)
  EXPECT_EQ(p, q);
  auto after = cpu_allocator::stats();
  EXPECT_GE(after.reuses, before.reuses + 1);
  cpu_allocator::free(q, 900);
}

TEST(ThreadPool, CoversRangeOnceAndIsStatic) {
  engine::testing::ThreadCount threads(1);
  for (int nt : {1, 2, 3}) {
    threads.set(nt);
    std::vector<int> hits(1000, 0);
    parallel_for(1000, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i]++;
    });
    for (int h : hits) EXPECT_EQ(h, 1);
  }
  threads.set(2);
  std::vector<int64_t> starts(2, -1);
  parallel_run([&](int t, int nt) { starts[t] = 1000 * t / nt; });
  EXPECT_EQ(starts, (std::vector<int64_t>{0, 500}));
  EXPECT_THROW(parallel_for(100, 1,
                            [](int64_t b, int64_t) {
                              if (b > 0) throw Error("boom");
                            }),
               Error);
}

TEST(Philox, KnownAnswer) {
  // Random123's known-answer test for philox4x32-10: counter 0, key 0.
  Philox4 r = philox4x32(0, 0, 0);
  EXPECT_EQ(r.v[0], 0x6627e8d5u);
  EXPECT_EQ(r.v[1], 0xe169c58du);
  EXPECT_EQ(r.v[2], 0xbc57ac4cu);
  EXPECT_EQ(r.v[3], 0x9b00dbd8u);
}

TEST(Philox, GeneratorStateIsSeedAndOffset) {
  Generator a(7), b(7);
  float x = a.uniform();
  EXPECT_EQ(x, b.uniform());
  Generator c(0);
  c.set_state(7, a.offset());
  EXPECT_EQ(a.uniform(), c.uniform());
  std::set<float> seen;
  for (int i = 0; i < 100; ++i) {
    float u = a.uniform();
    EXPECT_GE(u, 0.0f);
    EXPECT_LT(u, 1.0f);
    seen.insert(u);
  }
  EXPECT_GT(seen.size(), 95u);
}
