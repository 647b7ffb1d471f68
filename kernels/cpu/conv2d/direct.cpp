// kernels/cpu/conv2d/direct.cpp: the batch loops, workspace layout and kernel choice of the
// AVX-512 direct convolution (stride 1). The kernels are in direct_flat.cpp and
// direct_channel_vector.cpp.
//
// Forward and backward-input run one kernel per sample (Auto's forward of a one-channel input runs
// direct_one_channel.cpp's kernel instead), samples split over the pool's threads;
// each thread pads its sample into its own workspace slot first. Backward-input is the forward
// kernel on dy padded by k-1-pad with the filter flipped and transposed (Cout in, Cin out).
// Backward-weight splits the batch into fixed chunks of S samples (S from the shape only); each
// chunk writes its own partial dw and db, and the partials are added in chunk order, so the
// result does not depend on the thread count.
#include "kernels/cpu/conv2d/direct.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/cpu/conv2d/direct_simd.h"
#include "kernels/cpu/reduce.h"

namespace engine::kernels::cpu::detail {

#if defined(__AVX512F__)

void pad_plane(const float* src, int64_t h, int64_t w, int64_t pt, int64_t pl, int64_t hp,
               int64_t wp, float* dst) {
  // Rows are short (8 to 32 floats): each padded row is built in vectors of 16 columns, each
  // from one masked load whose address may precede src (masked-off lanes are not read).
  constexpr int64_t kMaxChunks = 16;  // rows up to 256 wide take this path
  if (wp > kMaxChunks * kLanes) {
    for (int64_t r = 0; r < hp; ++r) {
      float* d = dst + r * wp;
      const int64_t sr = r - pt;
      for (int64_t c = 0; c < wp; ++c)
        d[c] = (sr >= 0 && sr < h && c >= pl && c < pl + w) ? src[sr * w + c - pl] : 0.f;
    }
    return;
  }
  __mmask16 load_mask[kMaxChunks], store_mask[kMaxChunks];
  const int64_t chunks = ceil_div(wp, kLanes);
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t c = k * kLanes, cnt = std::min(kLanes, wp - c);
    // Lanes l with pl <= c + l < pl + w hold src[row][c + l - pl].
    const int64_t lo = std::max<int64_t>(0, pl - c), hi = std::min<int64_t>(cnt, pl + w - c);
    load_mask[k] = lo < hi ? static_cast<__mmask16>(((1u << (hi - lo)) - 1u) << lo) : 0;
    store_mask[k] = static_cast<__mmask16>((1u << cnt) - 1u);
  }
  const __m512 zero = _mm512_setzero_ps();
  const auto base = reinterpret_cast<intptr_t>(src) - pl * intptr_t{sizeof(float)};
  for (int64_t r = 0; r < hp; ++r) {
    float* d = dst + r * wp;
    const int64_t sr = r - pt;
    if (sr < 0 || sr >= h) {
      for (int64_t k = 0; k < chunks; ++k)
        _mm512_mask_storeu_ps(d + k * kLanes, store_mask[k], zero);
      continue;
    }
    const intptr_t row = base + sr * w * intptr_t{sizeof(float)};
    // Callers pad planes in memory order: fetch the next plane's row while this one is copied
    // (a hint: past the end of the tensor it is dropped, not faulted).
    const intptr_t next = row + (h * w + pl) * intptr_t{sizeof(float)};
    _mm_prefetch(reinterpret_cast<const char*>(next), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(next + (w - 1) * intptr_t{sizeof(float)}),
                 _MM_HINT_T0);
    for (int64_t k = 0; k < chunks; ++k) {
      const auto* at = reinterpret_cast<const float*>(row + k * kLanes * intptr_t{sizeof(float)});
      _mm512_mask_storeu_ps(d + k * kLanes, store_mask[k], _mm512_maskz_loadu_ps(load_mask[k], at));
    }
  }
}

namespace {

constexpr int64_t kChunkFloats = 1 << 17;  // backward-weight chunk budget (512 KiB of L2)

Geometry forward_geometry(const Conv2dShape& s) {
  return {s.c_in, s.h + 2 * s.pad, s.w + 2 * s.pad, s.c_out, s.kh, s.kw, s.pad, s.h};
}
// dx = conv(dy padded by k-1-pad, flipped transposed filter): Cout in, Cin out.
Geometry data_geometry(const Conv2dShape& s) {
  const int64_t pt = s.kh - 1 - s.pad, pl = s.kw - 1 - s.pad;
  return {s.c_out, s.oh() + 2 * pt, s.ow() + 2 * pl, s.c_in, s.kh, s.kw, pt, s.oh()};
}

// Flat wastes the padded columns (Wp - OW of every Wp); cv wastes channels up to a multiple of
// 16 and pays a transpose per output, which short filters (K < 32) do not amortise.
bool use_channel_vector(const Geometry& g, ConvAlgo k) {
  if (k != ConvAlgo::Auto) return k == ConvAlgo::ChannelVector;
  const int64_t oh = g.oh(), ow = g.ow();
  if (g.k() < 32) return false;
  double eff_cv = double(g.c_out) / double(round16(g.c_out));
  double eff_flat = double(oh * ow) / double(round16((oh - 1) * g.wp + ow));
  return eff_cv >= eff_flat;
}

int64_t pack_floats(const Geometry& g, bool cv) {
  return cv ? round16(g.c_out) * g.k() + round16(g.c_out) : round16(g.c_out * g.k());
}
int64_t sample_floats(const Geometry& g) {
  return round16(g.c_in * g.plane() + kSlack);
}

int64_t conv_ws(const Geometry& g, ConvAlgo k, int nthreads) {
  return pack_floats(g, use_channel_vector(g, k)) + nthreads * sample_floats(g);
}

// Packs the filter (value(o, k)) and bias for the chosen kernel; returns the bias to pass.
template <class F>
const float* pack(const Geometry& g, bool cv, const float* bias, float* ws, F value) {
  const int64_t k_len = g.k();
  if (!cv) {
    flat_pack(ws, g.c_out, k_len, value);
    return bias;
  }
  channel_vector_pack(ws, g.c_out, k_len, value);
  if (!bias) return nullptr;
  float* padded = ws + round16(g.c_out) * k_len;
  std::fill(padded, padded + round16(g.c_out), 0.f);
  std::copy(bias, bias + g.c_out, padded);
  return padded;
}

// out (N, Cout, OH, OW) from in (N, Cin, H, W), each sample padded by (pt, pl) first.
void conv_batch(const float* in, int64_t n, int64_t h, int64_t w, int64_t pt, int64_t pl,
                const Geometry& g, bool cv, const float* wpk, const float* bias, float* out,
                float* buffers) {
  const int64_t per = sample_floats(g), in_sample = g.c_in * h * w;
  const int64_t out_sample = g.c_out * g.oh() * g.ow();
  parallel_run([&](int t, int nt) {
    float* xp = buffers + t * per;
    std::memset(xp + g.c_in * g.plane(), 0, sizeof(float) * (per - g.c_in * g.plane()));
    for (int64_t i = n * t / nt; i < n * (t + 1) / nt; ++i) {
      for (int64_t c = 0; c < g.c_in; ++c)
        pad_plane(in + i * in_sample + c * h * w, h, w, pt, pl, g.hp, g.wp, xp + c * g.plane());
      if (cv)
        channel_vector_conv_sample(xp, g, wpk, bias, out + i * out_sample);
      else
        flat_conv_sample(xp, g, wpk, bias, out + i * out_sample);
    }
  });
}

// ---- backward-weight ----

struct WeightPlan {
  bool cv;
  int64_t chunk, n_chunks;
  int64_t w_part, part;  // floats of a chunk's dw partial, and with its db partial
  int64_t x_floats, dy_floats, per_thread;
  int64_t q_pad;  // flat: floats per channel of a chunk
};

bool use_channel_vector_weight(const Conv2dShape& s, ConvAlgo k) {
  if (k == ConvAlgo::Flat) return false;
  bool ok = channel_vector_weight_supported(s.kw);
  ENGINE_CHECK(ok || k == ConvAlgo::Auto, "conv2d_backward_weight: channel-vector kernel needs ",
               "kernel width 3 or 5, got ", s.kw);
  if (!ok || k == ConvAlgo::ChannelVector) return ok;
  const Geometry g = forward_geometry(s);
  double eff_cv = double(s.c_out) / double(round16(s.c_out));
  double eff_flat = double(s.oh() * s.ow()) / double(g.plane());
  return eff_cv >= eff_flat;
}

int64_t pow2_chunk(int64_t per_sample) {
  int64_t fit = std::max<int64_t>(1, kChunkFloats / per_sample), c = 1;
  while (c * 2 <= std::min<int64_t>(fit, 16)) c *= 2;
  return c;
}

WeightPlan weight_plan(const Conv2dShape& s, ConvAlgo k) {
  const Geometry g = forward_geometry(s);
  const int64_t plane = g.plane(), p = s.oh() * s.ow(), cpad = round16(s.c_out);
  WeightPlan f{};
  f.cv = use_channel_vector_weight(s, k);
  if (f.cv) {
    f.chunk = pow2_chunk(s.c_in * plane + p * cpad);
    f.w_part = g.k() * cpad;
    f.x_floats = f.chunk * s.c_in * plane + kSlack;
    f.dy_floats = f.chunk * p * cpad;
  } else {
    f.chunk = pow2_chunk((s.c_in + s.c_out) * plane);
    f.q_pad = round16(f.chunk * plane);
    f.w_part = s.c_out * g.k();
    // Tap reads run (KH-1)*Wp + KW-1 floats past the last channel.
    f.x_floats = s.c_in * f.q_pad + round16((g.kh - 1) * g.wp + g.kw - 1 + kLanes);
    f.dy_floats = s.c_out * f.q_pad;
  }
  f.n_chunks = ceil_div(s.n, f.chunk);
  f.part = round16(f.w_part + cpad);
  f.x_floats = round16(f.x_floats);
  f.per_thread = f.x_floats + round16(f.dy_floats);
  return f;
}

// Flat layout: xc (Cin, S, Hp, Wp) padded x, dyc (Cout, S, Hp, Wp) dy at the top left of each
// plane; adds each channel's dy sum to bias.
void fill_flat(const float* x, const float* dy, const Conv2dShape& s, const WeightPlan& f,
               int64_t n0, int64_t count, float* xc, float* dyc, float* bias) {
  const Geometry g = forward_geometry(s);
  const int64_t plane = g.plane(), oh = s.oh(), ow = s.ow(), used = count * plane;
  for (int64_t c = 0; c < s.c_in; ++c) {
    float* dst = xc + c * f.q_pad;
    for (int64_t j = 0; j < count; ++j)
      pad_plane(x + ((n0 + j) * s.c_in + c) * s.h * s.w, s.h, s.w, s.pad, s.pad, g.hp, g.wp,
                dst + j * plane);
    std::memset(dst + used, 0, sizeof(float) * (f.q_pad - used));
  }
  std::memset(xc + s.c_in * f.q_pad, 0, sizeof(float) * (f.x_floats - s.c_in * f.q_pad));
  for (int64_t c = 0; c < s.c_out; ++c) {
    float* dst = dyc + c * f.q_pad;
    for (int64_t j = 0; j < count; ++j) {
      const float* src = dy + ((n0 + j) * s.c_out + c) * oh * ow;
      bias[c] += sum_block(src, oh * ow);
      pad_plane(src, oh, ow, 0, 0, g.hp, g.wp, dst + j * plane);
    }
    std::memset(dst + used, 0, sizeof(float) * (f.q_pad - used));
  }
}

// Channel-vector layout: xs (count, Cin, Hp, Wp) padded x, dyt (count, OH*OW, cpad).
void fill_channel_vector(const float* x, const float* dy, const Conv2dShape& s, const WeightPlan& f,
                         int64_t n0, int64_t count, float* xs, float* dyt, float* bias) {
  const Geometry g = forward_geometry(s);
  const int64_t plane = g.plane(), p = s.oh() * s.ow(), cpad = round16(s.c_out);
  for (int64_t j = 0; j < count; ++j) {
    for (int64_t c = 0; c < s.c_in; ++c)
      pad_plane(x + ((n0 + j) * s.c_in + c) * s.h * s.w, s.h, s.w, s.pad, s.pad, g.hp, g.wp,
                xs + (j * s.c_in + c) * plane);
    channel_vector_transpose_dy(dy + (n0 + j) * s.c_out * p, s.c_out, p, dyt + j * p * cpad, bias);
  }
  const int64_t used = count * s.c_in * plane;
  std::memset(xs + used, 0, sizeof(float) * (f.x_floats - used));
}

}  // namespace

bool direct_supported(const Conv2dShape& s) {
  return s.stride == 1 && s.pad <= s.kh - 1 && s.pad <= s.kw - 1 && s.oh() > 0 && s.ow() > 0;
}

bool direct_channel_vector_weight_supported(const Conv2dShape& s) {
  return channel_vector_weight_supported(s.kw);
}

int64_t direct_forward_ws(const Conv2dShape& s, ConvAlgo k, int nthreads) {
  if (k == ConvAlgo::Auto && one_channel_supported(s)) return 0;
  return conv_ws(forward_geometry(s), k, nthreads);
}

int64_t direct_backward_input_ws(const Conv2dShape& s, ConvAlgo k, int nthreads) {
  return conv_ws(data_geometry(s), k, nthreads);
}

int64_t direct_backward_weight_ws(const Conv2dShape& s, ConvAlgo k, int nthreads) {
  WeightPlan f = weight_plan(s, k);
  return f.n_chunks * f.part + nthreads * f.per_thread;
}

bool direct_pool_supported(const Conv2dShape& s) {
  return one_channel_supported(s);
}

void direct_forward_pool(const float* x, const float* w, const float* b, float* y, int32_t* arg,
                         const Conv2dShape& s, const Pool2dShape& ps, bool relu) {
  one_channel_forward_pool(x, w, b, y, arg, s, ps, relu);
}

void direct_forward(const float* x, const float* w, const float* b, float* y, const Conv2dShape& s,
                    ConvAlgo k, float* ws) {
  if (k == ConvAlgo::Auto && one_channel_supported(s)) {  // a first layer: 9 or 25 taps
    one_channel_forward(x, w, b, y, s);
    return;
  }
  const Geometry g = forward_geometry(s);
  const bool cv = use_channel_vector(g, k);
  const int64_t k_len = g.k();
  const float* bias = pack(g, cv, b, ws, [&](int64_t o, int64_t t) { return w[o * k_len + t]; });
  conv_batch(x, s.n, s.h, s.w, s.pad, s.pad, g, cv, ws, bias, y, ws + pack_floats(g, cv));
}

void direct_backward_input(const float* dy, const float* w, float* dx, const Conv2dShape& s,
                           ConvAlgo k, float* ws) {
  const Geometry g = data_geometry(s);
  const bool cv = use_channel_vector(g, k);
  const int64_t khw = s.kh * s.kw;
  // Transposed filter: output ci, tap (co, kh, kw) = w[co][ci][KH-1-kh][KW-1-kw].
  pack(g, cv, nullptr, ws, [&](int64_t ci, int64_t t) {
    return w[(t / khw * s.c_in + ci) * khw + (khw - 1 - t % khw)];
  });
  conv_batch(dy, s.n, s.oh(), s.ow(), s.kh - 1 - s.pad, s.kw - 1 - s.pad, g, cv, ws, nullptr, dx,
             ws + pack_floats(g, cv));
}

void direct_backward_weight(const float* x, const float* dy, float* dw, float* db,
                            const Conv2dShape& s, float beta, ConvAlgo k, float* ws) {
  const WeightPlan f = weight_plan(s, k);
  const Geometry g = forward_geometry(s);
  const int64_t k_len = g.k(), cpad = round16(s.c_out), plane = g.plane();
  if (s.n == 0) {  // no chunks: the sums are zero
    for (int64_t i = 0; i < s.w_count(); ++i) dw[i] = beta == 0.f ? 0.f : beta * dw[i];
    for (int64_t i = 0; db && i < s.c_out; ++i) db[i] = beta == 0.f ? 0.f : beta * db[i];
    return;
  }
  float* parts = ws;
  float* buffers = ws + f.n_chunks * f.part;
  parallel_run([&](int t, int nt) {
    float* xb = buffers + t * f.per_thread;
    float* dyb = xb + f.x_floats;
    for (int64_t c = f.n_chunks * t / nt; c < f.n_chunks * (t + 1) / nt; ++c) {
      const int64_t n0 = c * f.chunk, count = std::min(f.chunk, s.n - n0);
      float* part = parts + c * f.part;
      float* bias = part + f.w_part;
      std::fill(bias, bias + cpad, 0.f);
      if (f.cv) {
        fill_channel_vector(x, dy, s, f, n0, count, xb, dyb, bias);
        channel_vector_weight_chunk(xb, dyb, count, g, part);
      } else {
        fill_flat(x, dy, s, f, n0, count, xb, dyb, bias);
        flat_weight_chunk(xb, dyb, g, f.q_pad, round16(count * plane), part);
      }
    }
  });
  // Partials added in chunk order, whatever the thread count: into chunk 0's, element-wise.
  parallel_for(f.part, 1024, [&](int64_t i0, int64_t i1) {
    for (int64_t c = 1; c < f.n_chunks; ++c) {
      const float* src = parts + c * f.part;
      for (int64_t i = i0; i < i1; ++i) parts[i] += src[i];
    }
  });
  parallel_for(s.c_out, 1, [&](int64_t o0, int64_t o1) {
    for (int64_t co = o0; co < o1; ++co) {
      for (int64_t t = 0; t < k_len; ++t) {
        const float acc = parts[f.cv ? t * cpad + co : co * k_len + t];
        float& d = dw[co * k_len + t];
        d = beta == 0.f ? acc : beta * d + acc;
      }
      if (db) db[co] = beta == 0.f ? parts[f.w_part + co] : beta * db[co] + parts[f.w_part + co];
    }
  });
}

#else  // no AVX-512: conv2d.cpp takes the im2col + GEMM path.

bool direct_pool_supported(const Conv2dShape&) {
  return false;
}
void direct_forward_pool(const float*, const float*, const float*, float*, int32_t*,
                         const Conv2dShape&, const Pool2dShape&, bool) {
  ENGINE_FAIL("conv2d: direct kernels not compiled (no AVX-512)");
}

bool direct_supported(const Conv2dShape&) {
  return false;
}
bool direct_channel_vector_weight_supported(const Conv2dShape&) {
  return false;
}
int64_t direct_forward_ws(const Conv2dShape&, ConvAlgo, int) {
  return 0;
}
int64_t direct_backward_input_ws(const Conv2dShape&, ConvAlgo, int) {
  return 0;
}
int64_t direct_backward_weight_ws(const Conv2dShape&, ConvAlgo, int) {
  return 0;
}
void direct_forward(const float*, const float*, const float*, float*, const Conv2dShape&, ConvAlgo,
                    float*) {
  ENGINE_FAIL("conv2d: direct kernels not compiled (no AVX-512)");
}
void direct_backward_input(const float*, const float*, float*, const Conv2dShape&, ConvAlgo,
                           float*) {
  ENGINE_FAIL("conv2d: direct kernels not compiled (no AVX-512)");
}
void direct_backward_weight(const float*, const float*, float*, float*, const Conv2dShape&, float,
                            ConvAlgo, float*) {
  ENGINE_FAIL("conv2d: direct kernels not compiled (no AVX-512)");
}

#endif

}  // namespace engine::kernels::cpu::detail
