// kernels/cuda/linear_lt.cu: the linear forward of CudaKernels::Engine on cuBLASLt, the bias
// added by the GEMM's epilogue (CUBLASLT_EPILOGUE_BIAS) instead of a broadcast kernel before it.
// Column-major, as linear.cu: y^T (out, N) = w x^T + b, with op(A) = w^T read as (in, out) with
// ld = in, transposed; B = x^T (in, N) with ld = in; D = y^T (out, N) with ld = out; the bias is
// per row of D. FP32 operands, or bf16 ones (bf16 precision: tensor cores, fp32 sums and an
// fp32 output), with CUBLAS_COMPUTE_32F (no TF32). Per (device, shape, bias, alignment, operand
// type) a plan keeps the descriptors and the heuristic's first algorithm, found once, so
// every call of a shape runs the same kernel; split-K only with a separate reduction step (never
// in place on the output), so results are the same run to run.
#include <cublasLt.h>

#include <memory>
#include <mutex>
#include <unordered_map>

#include "core/error.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/handles.cuh"
#include "kernels/cuda/internal.cuh"

namespace engine::kernels::cuda {
namespace {

constexpr size_t kLtWorkspace = size_t{32} << 20;

struct LtKey {
  int device;
  int64_t n, in, out;
  bool bias, aligned, bf16;
  bool operator==(const LtKey&) const = default;
};

struct LtKeyHash {
  size_t operator()(const LtKey& k) const {
    size_t h = static_cast<size_t>(k.device);
    for (int64_t v : {k.n, k.in, k.out, int64_t{k.bias}, int64_t{k.aligned}, int64_t{k.bf16}})
      h = h * 1000003u ^ static_cast<size_t>(v);
    return h;
  }
};

// Lives as long as the process (the cache is never cleared).
struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t ws_bytes = 0;
};

template <class T>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& v) {
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &v, sizeof v));
}

template <class T>
void set_pref(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, const T& v) {
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, attr, &v, sizeof v));
}

void find_algo(cublasLtHandle_t h, const LtKey& k, LtPlan& p) {
  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  set_pref(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, kLtWorkspace);
  const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE |
                           CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;  // not INPLACE
  set_pref(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, schemes);
  const uint32_t align = k.aligned ? 16u : 4u;
  for (auto attr :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    set_pref(pref, attr, align);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(h, p.desc, p.a, p.b, p.d, p.d, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  CUBLAS_CHECK(st);
  ENGINE_CHECK(found > 0 && result.state == CUBLAS_STATUS_SUCCESS,
               "cuda::linear_forward (engine): cuBLASLt has no algorithm for (n ", k.n, ", in ",
               k.in, ", out ", k.out, ")");
  p.algo = result.algo;
  p.ws_bytes = result.workspaceSize;
}

LtPlan make_plan(cublasLtHandle_t h, const LtKey& k) {
  LtPlan p;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set_desc(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  set_desc(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  if (k.bias) {
    set_desc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
    set_desc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, CUDA_R_32F);
  }
  const cudaDataType_t ab = k.bf16 ? CUDA_R_16BF : CUDA_R_32F;  // D stays fp32
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, ab, static_cast<uint64_t>(k.in),
                                          static_cast<uint64_t>(k.out), k.in));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, ab, static_cast<uint64_t>(k.in),
                                          static_cast<uint64_t>(k.n), k.in));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.d, CUDA_R_32F, static_cast<uint64_t>(k.out),
                                          static_cast<uint64_t>(k.n), k.out));
  find_algo(h, k, p);
  return p;
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

std::mutex g_mu;  // guards the cache, and each plan's bias pointer from setting to the call

}  // namespace

namespace detail {

void engine_linear_forward(int device, const void* x, const void* w, const float* b, float* y,
                           const LinearShape& s, bool bf16) {
  ::engine::cuda::DeviceGuard guard(device);
  cublasLtHandle_t h = cublaslt_handle(device);
  const int64_t per16 = bf16 ? 8 : 4;  // elements in 16 bytes
  const bool aligned = aligned16(x) && aligned16(w) && aligned16(y) && (!b || aligned16(b)) &&
                       s.in % per16 == 0 && s.out % 4 == 0;
  const LtKey k{device, s.n, s.in, s.out, b != nullptr, aligned, bf16};
  static auto* cache = new std::unordered_map<LtKey, std::unique_ptr<LtPlan>, LtKeyHash>();
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = cache->find(k);
  if (it == cache->end()) it = cache->emplace(k, std::make_unique<LtPlan>(make_plan(h, k))).first;
  LtPlan& p = *it->second;
  if (b) set_desc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, b);
  DeviceBlock ws(device, p.ws_bytes);
  const float alpha = 1.f, beta = 0.f;
  CUBLAS_CHECK(cublasLtMatmul(h, p.desc, &alpha, w, p.a, x, p.b, &beta, y, p.d, y, p.d, &p.algo,
                              ws.get(), ws.nbytes(), ::engine::cuda::compute_stream(device)));
}

}  // namespace detail
}  // namespace engine::kernels::cuda
