// apps/bench_kernels/data_ops.h: owns the data-layer Ops of bench_kernels: IDX decode (raw and
// gzip, data/idx.h) and the tutorials' normalisation of a batch (data/mnist.h).
#pragma once
#include <memory>
#include <string>

#include "kernels/testing/check.h"

namespace engine::bench {

using kernels::testing::Op;

// Decodes an IDX image file of `images` 28x28 MNIST-like images (a dark background, a bright
// blob: about as compressible as MNIST) written to a temporary file, removed with the Op.
// bytes() counts the decoded pixels.
std::unique_ptr<Op> make_idx_decode_op(int64_t images, bool gzip);

// dst (N, 784) floats = normalise(src (N, 784) uint8), checked against torchvision's formula.
std::unique_ptr<Op> make_normalize_op(int64_t batch);

}  // namespace engine::bench
