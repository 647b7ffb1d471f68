// kernels/cuda/conv2d.cu: 2-d convolution on cuDNN (v9's legacy convolution API).
//
// Per (device, shape) a Plan holds the descriptors and, found on first use of each pass, the
// algorithm: cudnnFind*AlgorithmEx times the candidates on the real buffers (outputs go to a
// scratch block, so finding never clobbers a gradient being accumulated), and the fastest
// deterministic one that fits kMaxWorkspace and multiplies directly (no FFT, no Winograd) is kept.
// Math is CUDNN_FMA_MATH: plain FP32, no TF32, so results stay within float rounding of the CPU
// kernels. Workspace comes from the caching allocator and goes back right after the call is queued:
// everything runs on the compute stream, so the next user of that block is queued after this
// convolution. CudaKernels::Engine: the weight gradient is the engine's own
// (kernels/cuda/wgrad.cu); the forward and the input gradient stay cuDNN's (their deterministic
// choices are fast).
#include <cudnn.h>

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/cuda_backend.h"
#include "core/error.h"
#include "kernels/choice.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/handles.cuh"
#include "kernels/cuda/internal.cuh"
#include "kernels/cuda/ops.h"

namespace engine::kernels::cuda {
namespace {

constexpr size_t kMaxWorkspace = size_t{512} << 20;

struct Key {
  int device;
  int64_t n, c_in, h, w, c_out, kh, kw, stride, pad;
  bool operator==(const Key&) const = default;
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = static_cast<size_t>(k.device);
    for (int64_t v : {k.n, k.c_in, k.h, k.w, k.c_out, k.kh, k.kw, k.stride, k.pad})
      h = h * 1000003u ^ static_cast<size_t>(v);
    return h;
  }
};

template <class Algo>
struct Choice {
  bool found = false;
  Algo algo{};
  size_t ws_bytes = 0;
};

// Descriptors live as long as the process (the cache is never cleared).
struct Plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  Choice<cudnnConvolutionFwdAlgo_t> fwd;
  Choice<cudnnConvolutionBwdDataAlgo_t> backward_input;
  Choice<cudnnConvolutionBwdFilterAlgo_t> backward_weight;
};

int i32(int64_t v) {
  return static_cast<int>(v);
}

void check(const Conv2dShape& s, const char* what) {
  ENGINE_CHECK(s.n >= 0 && s.c_in > 0 && s.h > 0 && s.w > 0 && s.c_out > 0 && s.kh > 0 &&
                   s.kw > 0 && s.stride > 0 && s.pad >= 0 && s.oh() > 0 && s.ow() > 0,
               what, ": bad shape x (", s.n, ", ", s.c_in, ", ", s.h, ", ", s.w, "), w (", s.c_out,
               ", ", s.c_in, ", ", s.kh, ", ", s.kw, "), stride ", s.stride, ", pad ", s.pad);
  ENGINE_CHECK(s.x_count() < INT32_MAX && s.y_count() < INT32_MAX, what,
               ": tensor over 2^31 elements for cuDNN's 4-d descriptors");
}

Plan make_plan(const Conv2dShape& s) {
  Plan p;
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&p.x));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&p.y));
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&p.w));
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p.conv));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(p.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i32(s.n),
                                         i32(s.c_in), i32(s.h), i32(s.w)));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(p.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i32(s.n),
                                         i32(s.c_out), i32(s.oh()), i32(s.ow())));
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(p.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, i32(s.c_out),
                                         i32(s.c_in), i32(s.kh), i32(s.kw)));
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p.conv, i32(s.pad), i32(s.pad), i32(s.stride),
                                              i32(s.stride), 1, 1, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT));
  CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv, CUDNN_FMA_MATH));
  int n = 0, c = 0, oh = 0, ow = 0;
  CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p.conv, p.x, p.w, &n, &c, &oh, &ow));
  ENGINE_CHECK(n == s.n && c == s.c_out && oh == s.oh() && ow == s.ow(),
               "cuda::conv2d: cuDNN's output (", n, ", ", c, ", ", oh, ", ", ow,
               ") differs from ours (", s.n, ", ", s.c_out, ", ", s.oh(), ", ", s.ow(), ")");
  return p;
}

std::mutex g_mu;  // guards the cache and the finds (a find runs once per shape and pass)

Plan& plan_for(int device, const Conv2dShape& s) {
  static auto* cache = new std::unordered_map<Key, std::unique_ptr<Plan>, KeyHash>();
  Key k{device, s.n, s.c_in, s.h, s.w, s.c_out, s.kh, s.kw, s.stride, s.pad};
  auto it = cache->find(k);
  if (it == cache->end()) it = cache->emplace(k, std::make_unique<Plan>(make_plan(s))).first;
  return *it->second;
}

bool tensor_core_math(cudnnMathType_t m) {
  return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

// Algorithms that multiply in the input's own basis. FFT and Winograd transform the operands
// first: deterministic, but about 1e-3 off in relative terms (seen on an H200: conv1's backward
// weight and backward input with c_in = 1 were 2e-3 off the CPU), far beyond FP32 reassociation.
bool direct_product(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_GEMM || a == CUDNN_CONVOLUTION_FWD_ALGO_DIRECT;
}
bool direct_product(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
}
bool direct_product(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
}

// The workspace to find with: the largest any heuristic candidate asks for, capped.
template <class Perf>
size_t find_workspace(const Perf* perf, int count) {
  size_t ws = 0;
  for (int i = 0; i < count; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= kMaxWorkspace &&
        perf[i].memory > ws)
      ws = perf[i].memory;
  return ws;
}

// The fastest (results come sorted by time) deterministic FP32 direct-product algorithm that fits
// `ws`; else the fastest FP32 direct-product one that fits.
template <class Perf, class Algo>
void choose(const Perf* perf, int count, size_t ws, const char* pass, const Conv2dShape& s,
            Choice<Algo>& out) {
  const Perf* pick = nullptr;
  for (int pass_no = 0; pass_no < 2 && !pick; ++pass_no)
    for (int i = 0; i < count && !pick; ++i) {
      const Perf& r = perf[i];
      if (r.status != CUDNN_STATUS_SUCCESS || r.memory > ws || tensor_core_math(r.mathType) ||
          !direct_product(r.algo))
        continue;
      if (pass_no == 0 && r.determinism != CUDNN_DETERMINISTIC) continue;
      pick = &r;
    }
  ENGINE_CHECK(pick != nullptr, "cuda::conv2d ", pass, ": cuDNN found no usable algorithm for x (",
               s.n, ", ", s.c_in, ", ", s.h, ", ", s.w, "), w (", s.c_out, ", ", s.c_in, ", ", s.kh,
               ", ", s.kw, "), stride ", s.stride, ", pad ", s.pad);
  out.algo = pick->algo;
  out.ws_bytes = pick->memory;
  out.found = true;
}

}  // namespace

void conv2d_forward(int device, const float* x, const float* w, const float* b, float* y,
                    const Conv2dShape& s) {
  check(s, "cuda::conv2d_forward");
  if (s.n == 0) return;
  ::engine::cuda::DeviceGuard guard(device);
  cudnnHandle_t h = cudnn_handle(device);
  std::lock_guard<std::mutex> lock(g_mu);
  Plan& p = plan_for(device, s);
  if (!p.fwd.found) {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int n = 0;
    CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, p.x, p.w, p.conv, p.y,
                                                       CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf));
    detail::DeviceBlock ws(device, find_workspace(perf, n));
    detail::DeviceBlock scratch(device, s.y_count() * sizeof(float));
    CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
        h, p.x, x, p.w, w, p.conv, p.y, scratch.get(), CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf,
        ws.get(), ws.nbytes()));
    choose(perf, n, ws.nbytes(), "forward", s, p.fwd);
  }
  detail::DeviceBlock ws(device, p.fwd.ws_bytes);
  const float one = 1.f, zero = 0.f;
  CUDNN_CHECK(cudnnConvolutionForward(h, &one, p.x, x, p.w, w, p.conv, p.fwd.algo, ws.get(),
                                      ws.nbytes(), &zero, p.y, y));
  if (b) {
    cudnnTensorDescriptor_t bias = nullptr;
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&bias));
    const cudnnStatus_t set = cudnnSetTensor4dDescriptor(bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                                         1, i32(s.c_out), 1, 1);
    const cudnnStatus_t add =
        set == CUDNN_STATUS_SUCCESS ? cudnnAddTensor(h, &one, bias, b, &one, p.y, y) : set;
    CUDNN_CHECK(cudnnDestroyTensorDescriptor(bias));
    CUDNN_CHECK(add);
  }
}

void conv2d_backward_input(int device, const float* dy, const float* w, float* dx,
                           const Conv2dShape& s) {
  check(s, "cuda::conv2d_backward_input");
  if (s.n == 0) return;
  ::engine::cuda::DeviceGuard guard(device);
  cudnnHandle_t h = cudnn_handle(device);
  std::lock_guard<std::mutex> lock(g_mu);
  Plan& p = plan_for(device, s);
  if (!p.backward_input.found) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int n = 0;
    CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        h, p.w, p.y, p.conv, p.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf));
    detail::DeviceBlock ws(device, find_workspace(perf, n));
    detail::DeviceBlock scratch(device, s.x_count() * sizeof(float));
    CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
        h, p.w, w, p.y, dy, p.conv, p.x, scratch.get(), CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n,
        perf, ws.get(), ws.nbytes()));
    choose(perf, n, ws.nbytes(), "backward data", s, p.backward_input);
  }
  detail::DeviceBlock ws(device, p.backward_input.ws_bytes);
  const float one = 1.f, zero = 0.f;
  CUDNN_CHECK(cudnnConvolutionBackwardData(h, &one, p.w, w, p.y, dy, p.conv, p.backward_input.algo,
                                           ws.get(), ws.nbytes(), &zero, p.x, dx));
}

void conv2d_backward_weight(int device, const float* x, const float* dy, float* dw, float* db,
                            const Conv2dShape& s, float beta) {
  check(s, "cuda::conv2d_backward_weight");
  ::engine::cuda::DeviceGuard guard(device);
  if (cuda_kernels() == CudaKernels::Engine)  // dw and db in one pass (kernels/cuda/wgrad.cu)
    return detail::engine_conv2d_wgrad(device, x, dy, dw, db, s, beta, false);
  if (db) conv2d_backward_bias(device, dy, db, s, beta);
  if (s.n == 0) {  // no samples: dw = beta * dw, zeros when beta is 0 (as the CPU)
    detail::scale_or_zero(device, dw, s.w_count(), beta);
    return;
  }
  cudnnHandle_t h = cudnn_handle(device);
  std::lock_guard<std::mutex> lock(g_mu);
  Plan& p = plan_for(device, s);
  if (!p.backward_weight.found) {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int n = 0;
    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        h, p.x, p.y, p.conv, p.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perf));
    detail::DeviceBlock ws(device, find_workspace(perf, n));
    detail::DeviceBlock scratch(device, s.w_count() * sizeof(float));
    CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
        h, p.x, x, p.y, dy, p.conv, p.w, scratch.get(), CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n,
        perf, ws.get(), ws.nbytes()));
    choose(perf, n, ws.nbytes(), "backward filter", s, p.backward_weight);
  }
  detail::DeviceBlock ws(device, p.backward_weight.ws_bytes);
  const float one = 1.f;
  CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, &one, p.x, x, p.y, dy, p.conv,
                                             p.backward_weight.algo, ws.get(), ws.nbytes(), &beta,
                                             p.w, dw));
}

void conv2d_backward_bias(int device, const float* dy, float* db, const Conv2dShape& s,
                          float beta) {
  check(s, "cuda::conv2d_backward_bias");
  detail::channel_sum(device, dy, db, s.n, s.c_out, s.oh() * s.ow(), beta);
}

}  // namespace engine::kernels::cuda
