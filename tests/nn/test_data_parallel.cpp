// tests/nn/test_data_parallel.cpp: nn::DataParallel against one module on the whole batch, and the
// differentiable scatter/gather ops under it (narrow0, to_device, cat0).
// Parameterised by the device list: {cpu, cpu}, {cpu, cpu, cpu}, and "cuda": every visible GPU,
// or {cuda:0, cuda:0} with one (skipped with the reason when none answers). The reference module
// always runs on the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/autograd.h"
#include "core/device.h"
#include "core/error.h"
#include "core/rng.h"
#include "nn/data_parallel.h"
#include "nn/functional.h"
#include "nn/models.h"
#include "nn/optim.h"
#include "nn/parallel_ops.h"
#include "tests/nn/gradcheck.h"

namespace engine {
namespace {

using engine::testing::random_tensor;
using engine::testing::rel_error;

Tensor images(int64_t n, uint64_t seed) {
  return random_tensor({n, 1, 28, 28}, seed, 0, 1);
}

Tensor labels(int64_t n, uint64_t seed) {
  Generator g(seed);
  std::vector<int64_t> v(n);
  for (auto& x : v) x = static_cast<int64_t>(g.uniform() * 10) % 10;
  return Tensor::from_vector_i64(v, {n});
}

// Calls f and checks that it throws engine::Error whose message contains `part`.
template <class F>
void expect_error(F f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no engine::Error (expected one mentioning '" << part << "')";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

// Two identical models (same initial parameters): `dp` for DataParallel, on devices[0], and
// `ref`, the single-module reference on the CPU. Each has its own dropout generator.
struct Twins {
  Twins(const std::string& name, std::optional<float> dropout, Device d) : dg_dp(7), dg_ref(7) {
    nn::ModelOptions o;
    o.dropout = dropout;
    opts = o;
    Generator g1(11), g2(11);
    dp = nn::make_model(name, o, g1, dg_dp);
    ref = nn::make_model(name, o, g2, dg_ref);
    dp->to(d);
  }
  Generator dg_dp, dg_ref;
  nn::ModelOptions opts;
  std::unique_ptr<nn::Model> dp, ref;
};

class DataParallelTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string p = GetParam();
    if (p == "cuda") {
      const int n = cuda_device_count();
      if (n < 1) GTEST_SKIP() << cuda_unavailable_reason();
      for (int i = 0; i < n; ++i) devices_.push_back(Device::cuda(i));
      if (n == 1) devices_.push_back(Device::cuda(0));
      // GPU kernels (cuDNN, cuBLAS) sum in another order than the CPU's.
      fwd_tol_ = 1e-4;
      grad_tol_ = 1e-4;
    } else {
      devices_.assign(p == "cpu3" ? 3 : 2, Device::cpu());
    }
  }
  Device dev0() const { return devices_[0]; }

  std::vector<Device> devices_;
  double fwd_tol_ = 1e-6, grad_tol_ = 1e-5;
};

// Every parameter's gradient of `got` (after reduce_gradients) against `want`'s, each relative to
// its own largest value but to no less than 1% of the model's largest: a conv bias before a
// BatchNorm has a gradient that cancels to rounding noise (on a GPU 0.7 of its own size).
void expect_same_grads(const nn::Model& got, const nn::Model& want, double tol) {
  auto g = got.named_parameters(), w = want.named_parameters();
  ASSERT_EQ(g.size(), w.size());
  double largest = 0;
  for (const auto& [name, p] : w) {
    ASSERT_TRUE(p.grad().defined()) << name;
    largest = std::max(largest, engine::testing::max_abs(p.grad()));
  }
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_TRUE(g[i].second.grad().defined()) << g[i].first << " got no gradient";
    EXPECT_LE(rel_error(g[i].second.grad(), w[i].second.grad(), 1e-2 * largest), tol) << g[i].first;
  }
}

void expect_no_replica_grads(nn::DataParallel& dp) {
  for (size_t i = 1; i < dp.devices().size(); ++i)
    for (auto& [n, t] : dp.replica(i).named_parameters())
      EXPECT_FALSE(t.grad().defined()) << "replica " << i << " still holds " << n << "'s grad";
}

TEST(DataParallelChunks, AsTorchScatter) {
  using V = std::vector<int64_t>;
  EXPECT_EQ(nn::DataParallel::chunk_sizes(6, 3), (V{2, 2, 2}));
  EXPECT_EQ(nn::DataParallel::chunk_sizes(5, 3), (V{2, 2, 1}));
  EXPECT_EQ(nn::DataParallel::chunk_sizes(4, 3), (V{2, 2}));  // torch.chunk: the third gets none
  EXPECT_EQ(nn::DataParallel::chunk_sizes(1, 2), (V{1}));
  EXPECT_EQ(nn::DataParallel::chunk_sizes(7, 1), (V{7}));
  EXPECT_EQ(nn::DataParallel::chunk_sizes(128, 3), (V{43, 43, 42}));
  EXPECT_EQ(nn::DataParallel::chunk_sizes(0, 2), V{});
}

TEST(DataParallelOps, NarrowCatToDeviceGradients) {
  // y = cat0(2 * narrow0 pieces in another order) checks both backward paths.
  testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        Tensor a = nn::narrow0(in[0], 0, 2), b = nn::narrow0(in[0], 2, 3);
        Tensor c = nn::to_device(nn::narrow0(in[1], 1, 1), Device::cpu());
        return nn::cat0({nn::relu(b), c, a, nn::linear(a, in[2], Tensor())}, Device::cpu());
      },
      {random_tensor({5, 4}, 1).set_requires_grad(true),
       random_tensor({2, 4}, 2).set_requires_grad(true),
       random_tensor({4, 4}, 3).set_requires_grad(true)});
}

TEST(DataParallelOps, ShapesAndErrors) {
  Tensor x = random_tensor({5, 2, 3}, 4);
  Tensor n = nn::narrow0(x, 1, 3);
  EXPECT_EQ(n.shape(), (Shape{3, 2, 3}));
  std::vector<float> xv = x.to_vector(), nv = n.to_vector();
  EXPECT_TRUE(std::equal(nv.begin(), nv.end(), xv.begin() + 6));
  Tensor c = nn::cat0({n, nn::narrow0(x, 0, 1)}, Device::cpu());
  EXPECT_EQ(c.shape(), (Shape{4, 2, 3}));
  EXPECT_TRUE(nn::to_device(x, Device::cpu()).same(x));
  expect_error([&] { nn::narrow0(x, 3, 3); }, "rows [3, 6)");
  expect_error(
      [&] {
        nn::cat0({x, random_tensor({5, 3, 2}, 5)}, Device::cpu());
      },
      "all but dim 0 must match");
  expect_error([&] { nn::cat0({}, Device::cpu()); }, "no tensors");
}

TEST_P(DataParallelTest, ForwardMatchesTheModuleOnTheWholeBatch) {
  for (const char* name : {"linear", "simplecnn", "net"}) {
    SCOPED_TRACE(name);
    Twins m(name, 0.0f, dev0());
    nn::DataParallel dp(*m.dp, devices_, nn::model_factory(name, m.opts));
    Tensor x = images(8, 21);
    Tensor got = dp.forward(x);
    ASSERT_EQ(got.device(), dev0());
    EXPECT_LE(rel_error(got, m.ref->forward(x)), fwd_tol_);
    m.dp->eval();
    m.ref->eval();
    EXPECT_LE(rel_error(dp.forward(x), m.ref->forward(x)), fwd_tol_) << "eval";
  }
}

// The reference's output for x: the whole batch at once, or (batch norm in train mode, which
// normalises each chunk with its own statistics) each chunk alone, concatenated.
Tensor reference_forward(nn::Model& ref, const Tensor& x, bool per_chunk, size_t k) {
  if (!per_chunk) return ref.forward(x);
  std::vector<Tensor> parts;
  int64_t start = 0;
  for (int64_t rows : nn::DataParallel::chunk_sizes(x.size(0), k)) {
    parts.push_back(ref.forward(nn::narrow0(x, start, rows)));
    start += rows;
  }
  return nn::cat0(parts, Device::cpu());
}

TEST_P(DataParallelTest, GradientsMatchTheModuleAfterReduce) {
  for (const char* name : {"linear", "simplecnn", "net", "convnet"}) {
    SCOPED_TRACE(name);
    const bool batch_norm = std::string(name) == "convnet";
    Twins m(name, 0.0f, dev0());
    nn::DataParallel dp(*m.dp, devices_, nn::model_factory(name, m.opts));
    Tensor x = images(12, 22), y = labels(12, 23);
    Tensor loss = m.dp->loss(dp.forward(x), y.to(dev0()));
    loss.backward();
    dp.reduce_gradients();
    Tensor ref_loss = m.ref->loss(reference_forward(*m.ref, x, batch_norm, devices_.size()), y);
    ref_loss.backward();
    EXPECT_LE(rel_error(loss, ref_loss), fwd_tol_ * 10);
    expect_same_grads(*m.dp, *m.ref, grad_tol_);
    expect_no_replica_grads(dp);
    for (auto& [n, t] : m.dp->named_parameters()) {
      if (t.grad().defined()) {
        EXPECT_EQ(t.grad().device(), dev0()) << n;
      }
    }
  }
}

TEST_P(DataParallelTest, SgdStepsTrackTheSingleModule) {
  Twins m("simplecnn", 0.0f, dev0());
  nn::DataParallel dp(*m.dp, devices_, nn::model_factory("simplecnn", m.opts));
  kernels::SgdConfig cfg;
  cfg.lr = 0.05;
  cfg.momentum = 0.5;
  nn::SGD opt_dp(m.dp->named_parameters(), cfg), opt_ref(m.ref->named_parameters(), cfg);
  for (int step = 0; step < 5; ++step) {
    SCOPED_TRACE(step);
    Tensor x = images(10, 100 + step), y = labels(10, 200 + step);
    opt_dp.zero_grad();
    Tensor loss = m.dp->loss(dp.forward(x), y.to(dev0()));
    loss.backward();
    dp.reduce_gradients();
    opt_dp.step();
    opt_ref.zero_grad();
    Tensor ref_loss = m.ref->loss(m.ref->forward(x), y);
    ref_loss.backward();
    opt_ref.step();
    EXPECT_LE(rel_error(loss, ref_loss), 1e-5);
    auto p = m.dp->named_parameters(), q = m.ref->named_parameters();
    for (size_t i = 0; i < p.size(); ++i)
      EXPECT_LE(rel_error(p[i].second, q[i].second), 1e-5) << p[i].first;
  }
}

TEST_P(DataParallelTest, UnevenAndSmallBatches) {
  for (int64_t n : {1, 2, 4, 5, 7}) {
    SCOPED_TRACE(n);
    Twins m("net", 0.0f, dev0());
    nn::DataParallel dp(*m.dp, devices_, nn::model_factory("net", m.opts));
    Tensor x = images(n, 30 + n), y = labels(n, 40 + n);
    Tensor out = dp.forward(x);
    EXPECT_EQ(out.shape(), (Shape{n, 10}));
    EXPECT_LE(rel_error(out, m.ref->forward(x)), fwd_tol_);
    m.dp->loss(out, y.to(dev0())).backward();
    dp.reduce_gradients();
    m.ref->loss(m.ref->forward(x), y).backward();
    expect_same_grads(*m.dp, *m.ref, grad_tol_);
    expect_no_replica_grads(dp);
  }
}

TEST_P(DataParallelTest, InputGradientFlowsBackThroughTheScatter) {
  Twins m("linear", std::nullopt, dev0());
  nn::DataParallel dp(*m.dp, devices_, nn::model_factory("linear"));
  Tensor x = images(7, 50).set_requires_grad(true);
  Tensor xr = x.detach().clone().set_requires_grad(true);
  Tensor y = labels(7, 51);
  m.dp->loss(dp.forward(x), y.to(dev0())).backward();
  m.ref->loss(m.ref->forward(xr), y).backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().device(), Device::cpu());
  EXPECT_LE(rel_error(x.grad(), xr.grad()), grad_tol_);
}

TEST_P(DataParallelTest, GradientsOfSeveralBackwardsAccumulate) {
  Twins m("linear", std::nullopt, dev0());
  nn::DataParallel dp(*m.dp, devices_, nn::model_factory("linear"));
  for (int micro = 0; micro < 2; ++micro) {
    Tensor x = images(6, 60 + micro), y = labels(6, 70 + micro);
    m.dp->loss(dp.forward(x), y.to(dev0())).backward();
    m.ref->loss(m.ref->forward(x), y).backward();
  }
  dp.reduce_gradients();
  expect_same_grads(*m.dp, *m.ref, grad_tol_);
  // A step dropped after backward: zero_grad() clears the replicas too, nothing leaks onwards.
  m.dp->loss(dp.forward(images(6, 80)), labels(6, 81).to(dev0())).backward();
  dp.zero_grad();
  for (auto& [n, t] : m.dp->named_parameters()) EXPECT_FALSE(t.grad().defined()) << n;
  expect_no_replica_grads(dp);
}

TEST_P(DataParallelTest, BatchNormTrainModeNormalisesEachChunk) {
  Twins m("convnet", std::nullopt, dev0());
  nn::DataParallel dp(*m.dp, devices_, nn::model_factory("convnet"));
  const int64_t n = 7;
  Tensor x = images(n, 90);
  Tensor got = dp.forward(x);
  // The reference runs each chunk alone; only chunk 0's running statistics stay (on the module).
  const int64_t rows0 = nn::DataParallel::chunk_sizes(n, devices_.size())[0];
  Twins chunk0("convnet", std::nullopt, Device::cpu());
  chunk0.ref->forward(nn::narrow0(x, 0, rows0));
  std::vector<float> running_after_chunk0;
  for (auto& [name, t] : chunk0.ref->named_buffers())
    if (name.find("running") != std::string::npos)
      for (float v : t.to_vector()) running_after_chunk0.push_back(v);
  EXPECT_LE(rel_error(got, reference_forward(*m.ref, x, true, devices_.size())), fwd_tol_ * 10);
  std::vector<float> running;
  for (auto& [name, t] : m.dp->named_buffers())
    if (name.find("running") != std::string::npos)
      for (float v : t.to_vector()) running.push_back(v);
  ASSERT_EQ(running.size(), running_after_chunk0.size());
  for (size_t i = 0; i < running.size(); ++i)
    EXPECT_NEAR(running[i], running_after_chunk0[i], 1e-5) << i;
  // Eval mode uses the module's running statistics on every replica: the whole batch matches a
  // module holding the same statistics.
  auto from = m.dp->named_buffers(), to = m.ref->named_buffers();
  for (size_t i = 0; i < from.size(); ++i) to[i].second.copy_from(from[i].second.to(Device::cpu()));
  m.dp->eval();
  m.ref->eval();
  Tensor x2 = images(9, 91);
  EXPECT_LE(rel_error(dp.forward(x2), m.ref->forward(x2)), fwd_tol_ * 10);
  for (size_t i = 1; i < devices_.size(); ++i) EXPECT_FALSE(dp.replica(i).is_training());
}

TEST_P(DataParallelTest, DropoutDrawsAnotherMaskOnEachReplica) {
  Twins m("simplecnn", std::nullopt, dev0());  // dropout 0.25 and 0.5
  nn::DataParallel dp(*m.dp, devices_, nn::model_factory("simplecnn"), 5);
  const size_t k = devices_.size();
  // The same image in every chunk: equal rows unless the masks differ.
  Tensor one = images(1, 95);
  std::vector<Tensor> same(k, one);
  Tensor x = nn::cat0(same, Device::cpu());
  std::vector<float> out = dp.forward(x).to_vector();
  for (size_t j = 1; j < k; ++j) {
    EXPECT_FALSE(std::equal(out.begin(), out.begin() + 10, out.begin() + 10 * j))
        << "replica " << j << " drew replica 0's mask";
    EXPECT_GT(dp.dropout_generator(j).offset(), 0u) << "replica " << j;
  }
  // The generators are distinct streams of their own.
  if (k > 2) {
    EXPECT_NE(dp.dropout_generator(1).seed(), dp.dropout_generator(2).seed());
  }
  // What a checkpoint keeps of the replicas' streams, restored into another DataParallel.
  const std::vector<uint64_t> offsets = dp.replica_dropout_offsets();
  ASSERT_EQ(offsets.size(), k - 1);
  nn::DataParallel again(*m.dp, devices_, nn::model_factory("simplecnn"), 5);
  again.restore_replica_dropout_offsets(offsets);
  for (size_t j = 1; j < k; ++j) {
    EXPECT_EQ(offsets[j - 1], dp.dropout_generator(j).offset()) << "replica " << j;
    EXPECT_EQ(again.dropout_generator(j).offset(), offsets[j - 1]) << "replica " << j;
    EXPECT_EQ(again.dropout_generator(j).seed(), dp.dropout_generator(j).seed()) << "replica " << j;
  }
  // Eval mode (the module's) reaches the replicas: no dropout, rows equal the module's.
  m.dp->eval();
  m.ref->eval();
  std::vector<float> ev = dp.forward(x).to_vector(), want = m.ref->forward(one).to_vector();
  for (size_t j = 0; j < k; ++j)
    for (size_t c = 0; c < 10; ++c)
      EXPECT_NEAR(ev[10 * j + c], want[c], 1e-5 * (1 + std::fabs(want[c]))) << j << "," << c;
}

TEST_P(DataParallelTest, BadInputIsAnError) {
  Twins m("linear", std::nullopt, dev0());
  nn::DataParallel dp(*m.dp, devices_, nn::model_factory("linear"));
  expect_error([&] { dp.forward(Tensor()); }, "undefined");
  expect_error([&] { dp.forward(Tensor::full({}, 1.0f)); }, "N >= 1");
  expect_error([&] { dp.forward(Tensor::empty({0, 1, 28, 28})); }, "N >= 1");
  // The factory must build the module's model.
  expect_error([&] { nn::DataParallel(*m.dp, devices_, nn::model_factory("net")); },
               "the factory builds another model");
  expect_error([&] { nn::DataParallel(*m.dp, devices_, nn::ReplicaFactory()); },
               "no replica factory");
}

TEST(DataParallelDevices, BadDeviceListsAreErrors) {
  Generator g(1), dg(2);
  auto model = nn::make_model("linear", {}, g, dg);
  auto f = nn::model_factory("linear");
  expect_error([&] { nn::DataParallel(*model, {}, f); }, "no devices given");
  expect_error(
      [&] {
        nn::DataParallel(*model, {Device::cpu(), Device::cuda(0)}, f);
      },
      "devices must be all CUDA or all CPU, got {cpu, cuda:0}");
  expect_error(
      [&] {
        nn::DataParallel(*model, {Device::cuda(0), Device::cpu()}, f);
      },
      "all CUDA or all CPU");
  if (cuda_device_count() == 0) {
    expect_error([&] { nn::DataParallel(*model, {Device::cuda(0)}, f); }, "not available");
  } else {  // the module must be on devices[0]
    expect_error(
        [&] {
          nn::DataParallel(*model, {Device::cuda(0), Device::cuda(0)}, f);
        },
        "not on devices[0] = cuda:0");
  }
  // One device: the module alone, no factory needed; the output is the module's.
  nn::DataParallel one(*model, {Device::cpu()}, nullptr);
  Tensor x = images(3, 5);
  EXPECT_EQ(rel_error(one.forward(x), model->forward(x)), 0.0);
  expect_error([&] { one.dropout_generator(0); }, "replica 0 uses the module's");
}

INSTANTIATE_TEST_SUITE_P(Devices, DataParallelTest, ::testing::Values("cpu2", "cpu3", "cuda"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace engine
