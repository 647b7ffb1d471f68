// kernels/cpu/cpu_features.cpp: cpuid, capped by ENGINE_MAX_CPU_ISA.
#include "kernels/cpu/cpu_features.h"

#include <cpuid.h>

#include <string>

#include "core/error.h"
#include "core/knobs.h"

namespace engine::kernels::cpu {
namespace {

struct Features {
  bool avx512f = false, avx512_bf16 = false;
  std::string capped_by;  // the ENGINE_MAX_CPU_ISA value that removed a feature, if any
};

// Leaf 7 sub-leaf 0: EBX bit 16 AVX512F; sub-leaf 1: EAX bit 5 AVX512_BF16. The OS must also
// save the zmm state (XCR0 bits 1, 2, 5, 6, 7).
Features probe() {
  Features f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return f;  // OSXSAVE
  unsigned xlo = 0, xhi = 0;
  __asm__("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
  if ((xlo & 0xE6) != 0xE6) return f;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  f.avx512f = b & (1u << 16);
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512_bf16 = f.avx512f && (a & (1u << 5));
  return f;
}

Features cap(Features f) {
  const std::string isa = knobs::max_cpu_isa();  // checked there
  if (isa.empty() || isa == "avx512_core_bf16") return f;
  if (f.avx512_bf16) f.capped_by = isa;
  f.avx512_bf16 = false;
  if (isa == "avx2") f.avx512f = false;
  return f;
}

const Features& features() {
  static const Features f = cap(probe());
  return f;
}

}  // namespace

bool has_avx512f() {
  return features().avx512f;
}

bool has_avx512_bf16() {
  return features().avx512_bf16;
}

void require_avx512_bf16(const char* what) {
  const Features& f = features();
  if (f.avx512_bf16) return;
  ENGINE_FAIL(what, " needs a CPU with AVX512_BF16 (vdpbf16ps): ",
              f.capped_by.empty() ? "this CPU does not have it"
                                  : "ENGINE_MAX_CPU_ISA=" + f.capped_by + " turns it off");
}

}  // namespace engine::kernels::cpu
