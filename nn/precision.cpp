// nn/precision.cpp: the process's matmul precision.
#include "nn/precision.h"

#include <atomic>

namespace engine::nn {
namespace {

std::atomic<Precision> g_precision{Precision::F32};

}  // namespace

void set_matmul_precision(Precision p) {
  g_precision = p;
}

Precision matmul_precision() {
  return g_precision.load(std::memory_order_relaxed);
}

PrecisionScope::PrecisionScope(Precision p) : saved_(matmul_precision()) {
  set_matmul_precision(p);
}

PrecisionScope::~PrecisionScope() {
  set_matmul_precision(saved_);
}

}  // namespace engine::nn
