// tests/comm/test_tensor_collectives.cpp: the Communicator's Tensor overloads and the gradient
// reducers (GradSync, HalfGradSync, PowerSgd) on each device: CPU tensors, and CUDA tensors over
// the staged path (pinned host memory around the ring). Ranks are threads over the in-memory
// transport; on CUDA rank r uses cuda:(r % devices). CUDA cases skip with "no CUDA device" where
// none answers.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "comm/backends/backend.h"
#include "comm/grad_sync.h"
#include "comm/half_grad_sync.h"
#include "comm/powersgd.h"
#include "comm/rendezvous/rendezvous.h"
#include "core/autograd.h"
#include "core/device.h"
#include "nn/functional.h"
#include "tests/comm/comm_test_util.h"

namespace engine::comm {
namespace {

using testing::expect_no_errors;
using testing::fval;
using testing::run_threads;

class TensorCollectives : public ::testing::TestWithParam<DeviceKind> {
 protected:
  void SetUp() override {
    if (GetParam() == DeviceKind::CUDA && cuda_device_count() == 0)
      GTEST_SKIP() << cuda_unavailable_reason();
  }
  Device device(int rank) const {
    return GetParam() == DeviceKind::CPU ? Device::cpu() : Device::cuda(rank % cuda_device_count());
  }
  Tensor values(int rank, int64_t n, float scale = 1.0f) const {
    std::vector<float> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = scale * fval(rank, i);
    return Tensor::from_vector(v, {n}, device(rank));
  }
};

std::vector<float> host(const Tensor& t) {
  return t.to(Device::cpu()).to_vector();
}

TEST_P(TensorCollectives, EveryCollectiveMatchesTheHostValues) {
  for (int W : {1, 2, 3}) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{W + 1}, int64_t{1013}}) {
      auto comms = make_mem_communicators(W);
      expect_no_errors(run_threads(W, [&](int r) {
        Communicator& c = *comms[r];
        Tensor a = values(r, n);
        c.all_reduce(a, ReduceOp::Sum);
        std::vector<float> got = host(a);
        for (size_t i = 0; i < got.size(); ++i) {
          float want = 0;
          for (int q = 0; q < W; ++q) want += fval(q, i);
          ASSERT_EQ(got[i], want) << "all_reduce W=" << W << " n=" << n << " at " << i;
        }
        Tensor b = values(r, n);
        c.broadcast(b, W - 1);
        got = host(b);
        for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], fval(W - 1, i)) << "broadcast";
        Tensor g = Tensor::zeros({n * W}, DType::F32, device(r));
        c.all_gather(values(r, n), g);
        got = host(g);
        for (int q = 0; q < W; ++q)
          for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(got[q * n + i], fval(q, static_cast<size_t>(i))) << "all_gather";
        Tensor out = Tensor::zeros({n}, DType::F32, device(r));
        c.reduce_scatter(values(r, n * W), out, ReduceOp::Max);
        got = host(out);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(got[i], fval(W - 1, static_cast<size_t>(r * n + i))) << "reduce_scatter";
        Tensor root_out = r == 0 ? Tensor::zeros({n * W}, DType::F32, device(r)) : Tensor();
        c.gather(values(r, n), root_out, 0);
        if (r == 0) {
          got = host(root_out);
          for (int q = 0; q < W; ++q)
            for (int64_t i = 0; i < n; ++i)
              ASSERT_EQ(got[q * n + i], fval(q, static_cast<size_t>(i))) << "gather";
        }
        Tensor part = Tensor::zeros({n}, DType::F32, device(r));
        c.scatter(r == 0 ? values(0, n * W) : Tensor(), part, 0);
        got = host(part);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(got[i], fval(0, static_cast<size_t>(r * n + i))) << "scatter";
        Tensor avg = values(r, n);
        c.all_reduce_async(avg, ReduceOp::Avg).wait();
        got = host(avg);
        for (size_t i = 0; i < got.size(); ++i) {
          float want = 0;
          for (int q = 0; q < W; ++q) want += fval(q, i);
          ASSERT_NEAR(got[i], want / W, 1e-3f) << "all_reduce_async AVG";
        }
        if (W >= 2) {
          if (r == 0) c.send(values(0, n), 1, 7);
          if (r == 1) {
            Tensor in = Tensor::zeros({n}, DType::F32, device(r));
            c.recv(in, 0, 7);
            got = host(in);
            for (int64_t i = 0; i < n; ++i)
              ASSERT_EQ(got[i], fval(0, static_cast<size_t>(i))) << "send/recv";
          }
        }
      }));
    }
  }
}

// A small chain of linear layers whose gradients depend on the rank's input; the last parameter
// is unused (its gradient counts as zeros). Shapes: x (1, 300) -> (1, 1) -> (1, 5) -> (1, 1).
const std::vector<Shape> kShapes = {{1, 300}, {1}, {5, 1}, {5}, {1, 5}, {1}, {7}};

NamedParams make_params(Device d) {
  NamedParams ps;
  for (size_t k = 0; k < kShapes.size(); ++k) {
    std::vector<float> v(static_cast<size_t>(shape_numel(kShapes[k])));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = 0.01f * static_cast<float>((i + 3 * k) % 17) - 0.05f;
    Tensor p = Tensor::from_vector(v, kShapes[k], d);
    p.set_requires_grad(true);
    const char name[] = {'p', static_cast<char>('0' + k), '\0'};  // kShapes has < 10 entries
    ps.emplace_back(name, p);
  }
  return ps;
}

void forward_backward(const NamedParams& ps, int rank, int step, Device d) {
  std::vector<float> x(300);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.001f * fval(rank, i + 17 * step);
  Tensor y = nn::linear(Tensor::from_vector(x, {1, 300}, d), ps[0].second, ps[1].second);
  y = nn::linear(y, ps[2].second, ps[3].second);
  y = nn::linear(y, ps[4].second, ps[5].second);
  y.backward();
}

// The mean over W ranks of forward_backward's gradients at `step`, computed on the CPU without
// any sync (zeros for the unused parameter).
std::vector<std::vector<float>> mean_gradients(int W, int step) {
  std::vector<std::vector<float>> want(kShapes.size());
  for (int q = 0; q < W; ++q) {
    NamedParams ref = make_params(Device::cpu());
    forward_backward(ref, q, step, Device::cpu());
    for (size_t k = 0; k < ref.size(); ++k) {
      want[k].resize(static_cast<size_t>(shape_numel(kShapes[k])), 0.0f);
      if (!ref[k].second.grad().defined()) continue;
      std::vector<float> g = ref[k].second.grad().to_vector();
      for (size_t i = 0; i < g.size(); ++i) want[k][i] += g[i] / W;
    }
  }
  return want;
}

// Two steps of begin, a real backward (the hooks fire), finish: every rank's gradients are the
// mean within tol (relative), on the parameters' device.
void expect_mean_after_two_steps(GradReducer& reducer, NamedParams& params, int W, int r, Device d,
                                 float tol) {
  for (int step = 0; step < 2; ++step) {
    const std::vector<std::vector<float>> want = mean_gradients(W, step);
    reducer.begin(step);
    forward_backward(params, r, step, d);
    reducer.finish();
    for (size_t k = 0; k < params.size(); ++k) {
      ASSERT_EQ(params[k].second.grad().device(), d);
      std::vector<float> g = host(params[k].second.grad());
      ASSERT_EQ(g.size(), want[k].size());
      for (size_t i = 0; i < g.size(); ++i)
        ASSERT_NEAR(g[i], want[k][i], tol * (1 + std::fabs(want[k][i])))
            << reducer.name() << " step " << step << " p" << k << "[" << i << "]";
      params[k].second.set_grad(Tensor());
    }
  }
}

// Bucketed, per-parameter and reduce-broadcast sync on the device give every rank the mean of the
// ranks' gradients, over buckets of several sizes.
TEST_P(TensorCollectives, GradSyncAveragesGradientsOnTheDevice) {
  constexpr int W = 2;
  for (SyncMode mode : {SyncMode::Bucketed, SyncMode::AllReduce, SyncMode::ReduceBroadcast}) {
    auto comms = make_mem_communicators(W);
    expect_no_errors(run_threads(W, [&](int r) {
      NamedParams params = make_params(device(r));
      GradSync sync(*comms[r], params, mode, /*bucket_bytes=*/64);
      expect_mean_after_two_steps(sync, params, W, r, device(r), 1e-5f);
    }));
  }
}

// The compressing reducers on device parameters: their buckets live on the host, each gradient's
// hook copies it there, finish() copies the result back. bf16 within its rounding; PowerSGD before
// its start step averages exactly.
TEST_P(TensorCollectives, CompressedReducersAverageGradientsOnTheDevice) {
  constexpr int W = 2;
  for (int kind = 0; kind < 2; ++kind) {
    auto comms = make_mem_communicators(W);
    expect_no_errors(run_threads(W, [&](int r) {
      NamedParams params = make_params(device(r));
      if (kind == 0) {
        HalfGradSync half(*comms[r], params, DType::BF16, /*bucket_bytes=*/64);
        expect_mean_after_two_steps(half, params, W, r, device(r), 1.0f / 64);
      } else {
        PowerSgd psgd(*comms[r], params, 1, /*start=*/100, 7, /*bucket_bytes=*/64);
        expect_mean_after_two_steps(psgd, params, W, r, device(r), 1e-5f);
      }
    }));
  }
}

// The queued all_reduce that gradient sync uses with NCCL goes through the Communicator to the
// CUDA backend: the default (staged) one says it queues none and refuses one; one that queues
// (a fake here: NCCL needs GPUs) gets the call's checks and its errors through the facade.
class QueuingBackend final : public FallbackBackend {
 public:
  QueuingBackend() : FallbackBackend(make_staged_backend()) {}
  const char* name() const override { return "queuing"; }
  bool queues_all_reduce() const override { return true; }
  void check_queued() const override { ENGINE_FAIL("a queued all_reduce failed"); }
};

TEST(CommFacade, QueuedAllReduceGoesThroughTheCudaBackend) {
  auto comms = make_mem_communicators(1);
  Communicator& c = *comms[0];
  EXPECT_FALSE(c.queues_all_reduce());
  EXPECT_NO_THROW(c.check_queued());
  const Tensor t = Tensor::zeros({4}, DType::F32, Device::cpu());
  EXPECT_THROW(c.all_reduce_queued(t, ReduceOp::Avg, cuda::Event()), Error);  // a CPU tensor

  c.set_backend(DeviceKind::CUDA, std::make_unique<QueuingBackend>());
  EXPECT_TRUE(c.queues_all_reduce());
  EXPECT_EQ(c.cuda_path(), "queuing");
  EXPECT_THROW(c.check_queued(), Error);
}

INSTANTIATE_TEST_SUITE_P(Devices, TensorCollectives,
                         ::testing::Values(DeviceKind::CPU, DeviceKind::CUDA),
                         [](const auto& info) {
                           return std::string(info.param == DeviceKind::CPU ? "cpu" : "cuda");
                         });

}  // namespace
}  // namespace engine::comm
