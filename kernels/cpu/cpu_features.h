// kernels/cpu/cpu_features.h: what this CPU can run, asked of cpuid once. ENGINE_MAX_CPU_ISA
// caps it as oneDNN's ONEDNN_MAX_CPU_ISA does (tests use it to see the error a CPU without a
// feature gives): "avx512_core_bf16" (the default, everything), "avx512_core" (no AVX512_BF16),
// "avx2" (no AVX-512).
#pragma once

namespace engine::kernels::cpu {

bool has_avx512f();      // AVX-512 Foundation (the fp32 direct kernels)
bool has_avx512_bf16();  // AVX512_BF16: vdpbf16ps, vcvtne2ps2bf16 (the bf16 kernels)

// Throws engine::Error "<what> needs a CPU with AVX512_BF16 (vdpbf16ps): <why not>" unless the
// CPU has it (and ENGINE_MAX_CPU_ISA allows it).
void require_avx512_bf16(const char* what);

}  // namespace engine::kernels::cpu
