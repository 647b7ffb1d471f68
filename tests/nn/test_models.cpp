// Tests of the models (PyTorch state_dict names and shapes, forward shapes, a falling loss),
// the optimizers (torch.optim semantics) and training checkpoints.
#include <gtest/gtest.h>

#include <map>
#include <optional>

#include "core/error.h"
#include "io/safetensors.h"
#include "nn/checkpoint.h"
#include "nn/functional.h"
#include "nn/layers.h"
#include "nn/models.h"
#include "nn/optim.h"
#include "tests/common/test_util.h"
#include "tests/nn/gradcheck.h"

using namespace engine;

namespace {

std::map<std::string, Shape> shapes(const nn::Module& m) {
  std::map<std::string, Shape> out;
  for (auto& [n, t] : m.state_dict()) out[n] = t.shape();
  return out;
}

std::unique_ptr<nn::Model> model(const std::string& name, uint64_t seed = 1,
                                 std::optional<float> dropout = std::nullopt) {
  static Generator dg(3);
  Generator g(seed);
  nn::ModelOptions o;
  o.dropout = dropout;
  return nn::make_model(name, o, g, dg);
}

}  // namespace

TEST(Models, StateDictKeysMatchPyTorch) {
  // Keys and shapes as printed by PyTorch for the tutorials' models: {k: tuple(v.shape) for k, v
  // in Model().state_dict().items()}.
  EXPECT_EQ(shapes(*model("simplecnn")),
            (std::map<std::string, Shape>{{"conv1.weight", {32, 1, 3, 3}},
                                          {"conv1.bias", {32}},
                                          {"conv2.weight", {64, 32, 3, 3}},
                                          {"conv2.bias", {64}},
                                          {"fc1.weight", {128, 3136}},
                                          {"fc1.bias", {128}},
                                          {"fc2.weight", {10, 128}},
                                          {"fc2.bias", {10}}}));
  EXPECT_EQ(shapes(*model("convnet")),
            (std::map<std::string, Shape>{{"layer1.0.weight", {16, 1, 5, 5}},
                                          {"layer1.0.bias", {16}},
                                          {"layer1.1.weight", {16}},
                                          {"layer1.1.bias", {16}},
                                          {"layer1.1.running_mean", {16}},
                                          {"layer1.1.running_var", {16}},
                                          {"layer1.1.num_batches_tracked", {}},
                                          {"layer2.0.weight", {32, 16, 5, 5}},
                                          {"layer2.0.bias", {32}},
                                          {"layer2.1.weight", {32}},
                                          {"layer2.1.bias", {32}},
                                          {"layer2.1.running_mean", {32}},
                                          {"layer2.1.running_var", {32}},
                                          {"layer2.1.num_batches_tracked", {}},
                                          {"fc.weight", {10, 1568}},
                                          {"fc.bias", {10}}}));
  EXPECT_EQ(shapes(*model("net")), (std::map<std::string, Shape>{{"conv1.weight", {10, 1, 5, 5}},
                                                                 {"conv1.bias", {10}},
                                                                 {"conv2.weight", {20, 10, 5, 5}},
                                                                 {"conv2.bias", {20}},
                                                                 {"fc1.weight", {50, 320}},
                                                                 {"fc1.bias", {50}},
                                                                 {"fc2.weight", {10, 50}},
                                                                 {"fc2.bias", {10}}}));
  EXPECT_EQ(shapes(*model("linear")),
            (std::map<std::string, Shape>{{"weight", {10, 784}}, {"bias", {10}}}));
  // PyTorch's order: conv2d params, then batchnorm params then its buffers.
  auto sd = model("convnet")->state_dict();
  EXPECT_EQ(sd[2].first, "layer1.1.weight");
  EXPECT_EQ(sd[4].first, "layer1.1.running_mean");
  EXPECT_THROW(model("resnet"), Error);
}

TEST(Models, InitialisationBoundsAreKaimingUniform) {
  auto m = model("simplecnn");
  for (auto& [n, t] : m->named_parameters()) {
    float bound = n.rfind("conv1", 0) == 0 ? 1 / 3.0f : n.rfind("fc1", 0) == 0 ? 1 / 56.0f : 1.0f;
    float mx = 0;
    for (float v : t.to_vector()) mx = std::max(mx, std::abs(v));
    EXPECT_LE(mx, bound) << n;
    if (n == "conv1.weight") {
      EXPECT_GT(mx, 0.9f * bound);
    }
  }
}

// A ReLU then a MaxPool2d in a Sequential run as one max_pool2d_relu: same values and gradients
// as the two layers apart; a ReLU followed by anything else, or last, still runs on its own.
TEST(Models, SequentialFusesReluThenMaxPool) {
  auto pool = std::make_shared<nn::MaxPool2d>(2, 2);
  nn::Sequential fused, apart;
  fused.add(std::make_shared<nn::ReLU>()).add(std::make_shared<nn::ReLU>()).add(pool);
  fused.add(std::make_shared<nn::ReLU>());
  EXPECT_TRUE(pool->with_relu);
  auto alone = std::make_shared<nn::MaxPool2d>(2, 2);
  apart.add(alone).add(std::make_shared<nn::ReLU>());
  EXPECT_FALSE(alone->with_relu);
  for (nn::Sequential* s : {&fused, &apart}) {
    Tensor a = engine::testing::random_tensor({2, 3, 7, 9}, 31), b = a.detach().clone();
    a.set_requires_grad(true);
    b.set_requires_grad(true);
    Tensor r = engine::testing::random_tensor({2, 3, 3, 4}, 32);
    Tensor y = (*s)(a), want = nn::max_pool2d(nn::relu(b), 2, 2);
    EXPECT_EQ(y.to_vector(), want.to_vector());
    y.backward(r);
    want.backward(r);
    EXPECT_EQ(a.grad().to_vector(), b.grad().to_vector());
  }
}

// A BatchNorm2d then a MaxPool2d (with or without a ReLU between) in a Sequential run as one
// batch_norm2d_pool: the same values, running statistics, batch count and gradients as the layers
// apart, in train and eval mode.
TEST(Models, SequentialFusesBatchNormReluMaxPool) {
  for (bool relu : {true, false}) {
    SCOPED_TRACE(relu ? "with relu" : "no relu");
    auto pool = std::make_shared<nn::MaxPool2d>(2, 2);
    auto bn_fused = std::make_shared<nn::BatchNorm2d>(3),
         bn_apart = std::make_shared<nn::BatchNorm2d>(3);
    nn::Sequential fused, apart;
    fused.add(bn_fused);
    if (relu) fused.add(std::make_shared<nn::ReLU>());
    fused.add(pool);
    EXPECT_EQ(pool->bn, bn_fused.get());
    auto alone = std::make_shared<nn::MaxPool2d>(2, 2);
    Generator gen(1);
    apart.add(bn_apart);
    if (relu) apart.add(std::make_shared<nn::ReLU>());
    apart.add(std::make_shared<nn::Dropout>(0.f, gen)).add(alone);  // keeps them apart
    EXPECT_EQ(alone->bn, nullptr);
    for (bool train : {true, false}) {
      fused.train(train);
      apart.train(train);
      Tensor a = engine::testing::random_tensor({2, 3, 7, 9}, 41), b = a.detach().clone();
      a.set_requires_grad(true);
      b.set_requires_grad(true);
      Tensor y = fused(a), want = apart(b);
      EXPECT_LE(engine::testing::rel_error(y, want), 1e-6);
      EXPECT_EQ(bn_fused->running_mean.to_vector(), bn_apart->running_mean.to_vector());
      EXPECT_EQ(bn_fused->num_batches_tracked.to_vector_i64(),
                bn_apart->num_batches_tracked.to_vector_i64());
      // One training batch so far (the eval pass counts none), in both paths.
      EXPECT_EQ(bn_fused->num_batches_tracked.to_vector_i64(), std::vector<int64_t>{1});
      if (!train) continue;
      Tensor r = engine::testing::random_tensor({2, 3, 3, 4}, 42);
      y.backward(r);
      want.backward(r);
      EXPECT_LE(engine::testing::rel_error(a.grad(), b.grad()), 1e-5);
      EXPECT_LE(engine::testing::rel_error(bn_fused->weight.grad(), bn_apart->weight.grad()), 1e-5);
    }
  }
}

TEST(Models, ForwardShapesAndLossFalls) {
  for (const char* name : {"simplecnn", "convnet", "net", "linear"}) {
    auto m = model(name, 1, 0.0f);  // no dropout: 8 random images must be memorised
    Tensor x = engine::testing::random_tensor({8, 1, 28, 28}, 21);
    Tensor y = Tensor::from_vector_i64({0, 1, 2, 3, 4, 5, 6, 7}, {8});
    EXPECT_EQ(m->forward(x).shape(), (Shape{8, 10})) << name;
    kernels::SgdConfig cfg;
    cfg.lr = 0.05;
    cfg.momentum = 0.5;
    nn::SGD opt(m->named_parameters(), cfg);
    float first = 0, last = 0;
    for (int step = 0; step < 30; ++step) {
      opt.zero_grad();
      Tensor loss = m->loss(m->forward(x), y);
      loss.backward();
      opt.step();
      (step == 0 ? first : last) = loss.item();
    }
    EXPECT_LT(last, 0.7f * first) << name;
  }
}

TEST(Optim, SgdMatchesTorchByHand) {
  // torch.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True), p = 1, g = 0.5:
  // step 1: d = 0.5 + 0.01 = 0.51, buf = 0.51, d = 0.51 + 0.9 * 0.51 = 0.969, p = 0.9031
  // step 2: d = 0.5 + 0.009031 = 0.509031, buf = 0.9 * 0.51 + 0.509031 = 0.968031,
  //         d = 0.509031 + 0.9 * 0.968031 = 1.3802589, p = 0.9031 - 0.13802589 = 0.76507411
  Tensor p = Tensor::full({1}, 1.0f);
  p.set_requires_grad(true);
  kernels::SgdConfig c;
  c.lr = 0.1;
  c.momentum = 0.9;
  c.weight_decay = 0.01;
  c.nesterov = true;
  nn::SGD opt({{"p", p}}, c);
  for (float want : {0.9031f, 0.76507411f}) {
    p.set_grad(Tensor::full({1}, 0.5f));
    opt.step();
    EXPECT_NEAR(p.item(), want, 1e-6);
  }
}

TEST(Optim, AdamMatchesTorchByHand) {
  // torch.optim.Adam([p], lr=0.1), p = 1, g = 0.5 each step: the first step moves p by lr
  // (m_hat / sqrt(v_hat) = 1), so p = 0.9; the second too (constant gradient): p = 0.8.
  Tensor p = Tensor::full({1}, 1.0f);
  p.set_requires_grad(true);
  kernels::AdamConfig c;
  c.lr = 0.1;
  nn::Adam opt({{"p", p}}, c);
  for (float want : {0.9f, 0.8f}) {
    p.set_grad(Tensor::full({1}, 0.5f));
    opt.step();
    EXPECT_NEAR(p.item(), want, 1e-6);
  }
}

TEST(Checkpoint, StateDictRoundTripAndStrictErrors) {
  auto a = model("convnet", 1), b = model("convnet", 2);
  engine::testing::TempDir dir;
  std::string path = dir.file("sd.safetensors");
  nn::save_state_dict(path, *a);
  nn::load_state_dict(path, *b);
  auto sa = a->state_dict(), sb = b->state_dict();
  for (size_t i = 0; i < sa.size(); ++i) {
    if (sa[i].second.dtype() == DType::F32) {
      EXPECT_EQ(sa[i].second.to_vector(), sb[i].second.to_vector()) << sa[i].first;
    }
  }
  auto net = model("net");
  try {
    nn::load_state_dict(path, *net);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("conv1.weight"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, TrainingCheckpointRestoresOptimizerAndPosition) {
  auto m = model("linear");
  kernels::SgdConfig c;
  c.momentum = 0.9;
  nn::SGD opt(m->named_parameters(), c);
  Tensor x = engine::testing::random_tensor({4, 1, 28, 28}, 22);
  Tensor y = Tensor::from_vector_i64({1, 2, 3, 4}, {4});
  auto step = [&](nn::Model& mm, nn::Optimizer& o) {
    o.zero_grad();
    mm.loss(mm.forward(x), y).backward();
    o.step();
  };
  step(*m, opt);
  nn::TrainPosition pos;
  pos.epoch = 2;
  pos.batch_in_epoch = 7;
  pos.step = 99;
  pos.dropout_seed = 5;
  pos.dropout_offset = 123;
  pos.replica_dropout_offsets = {7, 8};
  pos.model = "linear";
  pos.world_size = 3;
  pos.batch_size = 96;
  engine::testing::TempDir dir;
  std::string path = dir.file("train.safetensors");
  nn::save_training_checkpoint(path, *m, opt, pos);
  // The metadata keys every version of train writes and reads.
  const std::map<std::string, std::string> keys = {{"format", "pt"},
                                                   {"engine.checkpoint", "train-v1"},
                                                   {"engine.epoch", "2"},
                                                   {"engine.batch_in_epoch", "7"},
                                                   {"engine.step", "99"},
                                                   {"engine.optimizer_steps", "1"},
                                                   {"engine.init_seed", "0"},
                                                   {"engine.dropout_seed", "5"},
                                                   {"engine.dropout_offset", "123"},
                                                   {"dp_dropout_offset_1", "7"},
                                                   {"dp_dropout_offset_2", "8"},
                                                   {"model", "linear"},
                                                   {"engine.world_size", "3"},
                                                   {"engine.batch_size", "96"},
                                                   {"engine.world_invariant", "0"}};
  EXPECT_EQ(load_safetensors(path).metadata, keys);
  step(*m, opt);  // the uninterrupted run's next step

  auto m2 = model("linear", 9);
  nn::SGD opt2(m2->named_parameters(), c);
  nn::TrainPosition got = nn::load_training_checkpoint(path, *m2, opt2);
  EXPECT_EQ(got.epoch, 2);
  EXPECT_EQ(got.batch_in_epoch, 7);
  EXPECT_EQ(got.step, 99);
  EXPECT_EQ(got.dropout_offset, 123u);
  EXPECT_EQ(got.replica_dropout_offsets, (std::vector<uint64_t>{7, 8}));
  EXPECT_EQ(got.model, "linear");
  EXPECT_EQ(opt2.steps(), 1);
  step(*m2, opt2);  // the resumed run's next step: bit for bit the same
  EXPECT_EQ(m->state_dict()[0].second.to_vector(), m2->state_dict()[0].second.to_vector());
  // Without DataParallel replicas or a model name, the file has no such keys and reads back empty.
  nn::save_training_checkpoint(path, *m, opt, nn::TrainPosition{});
  StFile plain = load_safetensors(path);
  EXPECT_EQ(plain.metadata.count("dp_dropout_offset_1") + plain.metadata.count("model"), 0u);
  got = nn::load_training_checkpoint(path, *m2, opt2);
  EXPECT_TRUE(got.replica_dropout_offsets.empty());
  EXPECT_EQ(got.model, "");
  // A plain state dict is not a training checkpoint.
  nn::save_state_dict(path, *m);
  EXPECT_THROW(nn::load_training_checkpoint(path, *m2, opt2), Error);
}
