// comm/half_grad_sync.cpp: the 16-bit bucket codec: round, all_reduce in bf16 or fp16, widen.
#include "comm/half_grad_sync.h"

#include <memory>
#include <utility>
#include <vector>

#include "core/error.h"
#include "kernels/half.h"

namespace engine::comm {
namespace {

class HalfCodec : public BucketCodec {
 public:
  explicit HalfCodec(DType wire) : wire_(wire) {
    ENGINE_CHECK(wire_ == DType::BF16 || wire_ == DType::F16,
                 "gradient compression: the wire type must be BF16 or F16, got ",
                 dtype_name(wire_));
  }
  void plan(const NamedParams&, const std::vector<std::vector<size_t>>&,
            const std::vector<size_t>&) override {}  // elementwise: the layout does not matter

  void reduce(Communicator& c, size_t, float* flat, size_t count, int64_t) override {
    const bool bf16 = wire_ == DType::BF16;
    std::vector<uint16_t> wire(count);
    for (size_t i = 0; i < count; ++i)
      wire[i] = bf16 ? kernels::bf16_from_f32(flat[i]) : kernels::f16_from_f32(flat[i]);
    c.all_reduce(wire.data(), count, wire_, ReduceOp::Sum);
    const float inv_world = 1.0f / static_cast<float>(c.size());
    for (size_t i = 0; i < count; ++i)
      flat[i] =
          (bf16 ? kernels::f32_from_bf16(wire[i]) : kernels::f32_from_f16(wire[i])) * inv_world;
  }

  int64_t bytes(size_t, size_t count, int64_t, int world) const override {
    return ring_send_bytes(static_cast<int64_t>(count) * 2, world);
  }
  std::string name() const override { return wire_ == DType::BF16 ? "bf16" : "fp16"; }

 private:
  DType wire_;
};

}  // namespace

HalfGradSync::HalfGradSync(Communicator& comm, NamedParams params, DType wire, size_t bucket_bytes)
    : GradSync(comm, std::move(params), std::make_unique<HalfCodec>(wire), bucket_bytes) {}

void HalfGradSync::reduce() {
  begin(0);
  finish();
}

}  // namespace engine::comm
