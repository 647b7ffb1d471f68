// apps/bench_kernels/data_ops.cpp: IDX decode and normalisation Ops.
#include "apps/bench_kernels/data_ops.h"

#include <unistd.h>

#include <filesystem>

#include "core/rng.h"
#include "data/idx.h"
#include "data/mnist.h"

namespace engine::bench {

using kernels::testing::Buffer;
using kernels::testing::CheckResult;
using kernels::testing::compare;
using kernels::testing::compare_ints;
using kernels::testing::kExact;
namespace {

constexpr int64_t kSide = 28;

// Zero outside a disc of radius 10 around the centre, Philox noise of 64..255 inside.
std::vector<uint8_t> synthetic_images(int64_t images) {
  std::vector<uint8_t> px(images * kSide * kSide);
  for (int64_t n = 0; n < images; ++n)
    for (int64_t r = 0; r < kSide; ++r)
      for (int64_t c = 0; c < kSide; ++c) {
        int64_t i = (n * kSide + r) * kSide + c, dr = r - 14, dc = c - 14;
        float u = philox_uniform(99, 0, static_cast<uint64_t>(i));
        px[i] = dr * dr + dc * dc < 100 ? static_cast<uint8_t>(64 + u * 191) : 0;
      }
  return px;
}

class IdxDecodeOp : public Op {
 public:
  IdxDecodeOp(int64_t images, bool gzip)
      : dims_{images, kSide, kSide}, pixels_(synthetic_images(images)) {
    path_ = (std::filesystem::temp_directory_path() /
             ("bench_kernels_" + std::to_string(getpid()) + (gzip ? ".idx3.gz" : ".idx3")))
                .string();
    data::write_idx(path_, dims_, pixels_, gzip);
  }
  ~IdxDecodeOp() override {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  void run() override { got_ = data::read_idx(path_); }
  CheckResult check() override {
    run();
    CheckResult r = compare_ints("dims", got_.dims.data(), dims_.data(),
                                 std::min<int64_t>(got_.dims.size(), dims_.size()));
    if (got_.dims != dims_) {
      r.err = std::numeric_limits<double>::infinity();
      r.what = "dims " + data::dims_to_string(got_.dims) + " vs " + data::dims_to_string(dims_);
      return r;
    }
    return compare_ints("pixels", got_.data.data(), pixels_.data(), int64_t(pixels_.size()));
  }
  double bytes() const override { return double(pixels_.size()); }

 private:
  std::vector<int64_t> dims_;
  std::vector<uint8_t> pixels_;
  std::string path_;
  data::IdxArray got_;
};

class NormalizeOp : public Op {
 public:
  explicit NormalizeOp(int64_t batch) : src_(synthetic_images(batch)), dst_(int64_t(src_.size())) {}
  void run() override { data::normalize_into(src_.data(), dst_, dst_.count()); }
  CheckResult check() override {
    run();
    std::vector<float> want(src_.size());
    for (size_t i = 0; i < src_.size(); ++i)  // torchvision: ToTensor, then Normalize, in float
      want[i] = (static_cast<float>(src_[i]) / 255.0f - data::kMnistMean) / data::kMnistStd;
    return compare("x", dst_, want.data(), dst_.count(), kExact);
  }
  double bytes() const override { return 5.0 * dst_.count(); }  // 1 byte in, 4 bytes out

 private:
  std::vector<uint8_t> src_;
  Buffer<float> dst_;
};

}  // namespace

std::unique_ptr<Op> make_idx_decode_op(int64_t images, bool gzip) {
  return std::make_unique<IdxDecodeOp>(images, gzip);
}

std::unique_ptr<Op> make_normalize_op(int64_t batch) {
  return std::make_unique<NormalizeOp>(batch);
}

}  // namespace engine::bench
