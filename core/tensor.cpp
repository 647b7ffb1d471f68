// core/tensor.cpp: Tensor construction, copies across devices, views and in-place basics.
#include "core/tensor.h"

#include <cstdio>
#include <cstring>
#include <sstream>

#include "core/allocator.h"
#include "core/autograd.h"
#include "core/cuda_backend.h"
#include "core/elementwise.h"
#include "core/error.h"
#include "core/sync_guard.h"

namespace engine {

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << (s.size() == 1 ? ",)" : ")");
  return os.str();
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

Storage::Storage(size_t n, Device d) : nbytes(n), device(d) {
  data = n ? device_alloc(d, n) : nullptr;
}
Storage::~Storage() {
  if (!data) return;
  try {
    device_free(device, data, nbytes);
  } catch (const std::exception& e) {  // destructors never throw: log and go on
    std::fprintf(stderr, "engine: freeing %zu bytes on %s failed: %s\n", nbytes,
                 device.str().c_str(), e.what());
  }
}

Tensor Tensor::empty(const Shape& shape, DType dt, Device d) {
  for (int64_t x : shape) ENGINE_CHECK(x >= 0, "negative dimension in shape ", shape_str(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(shape_numel(shape) * dtype_size(dt), d);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dt;
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, DType dt, Device d) {
  Tensor t = empty(shape, dt, d);
  if (t.nbytes() == 0) return t;
  if (d.is_cpu())
    std::memset(t.raw_data(), 0, t.nbytes());
  else if (dt == DType::F32)
    cuda::fill_f32(d.index, t.data<float>(), 0.0f, t.numel());
  else
    t.copy_from(zeros(shape, dt));
  return t;
}

Tensor Tensor::full(const Shape& shape, float value, Device d) {
  Tensor t = empty(shape, DType::F32, d);
  t.fill_(value);
  return t;
}

Tensor Tensor::from_vector(const std::vector<float>& v, const Shape& shape, Device d) {
  ENGINE_CHECK(static_cast<int64_t>(v.size()) == shape_numel(shape), "from_vector: ", v.size(),
               " values for shape ", shape_str(shape));
  Tensor t = empty(shape, DType::F32, d);
  if (d.is_cpu()) {
    if (!v.empty()) std::memcpy(t.raw_data(), v.data(), v.size() * 4);
  } else if (!v.empty()) {
    cuda::copy(t.raw_data(), d, v.data(), Device::cpu(), v.size() * 4);
  }
  return t;
}

Tensor Tensor::from_vector_i64(const std::vector<int64_t>& v, const Shape& shape, Device d) {
  ENGINE_CHECK(static_cast<int64_t>(v.size()) == shape_numel(shape), "from_vector_i64: ", v.size(),
               " values for shape ", shape_str(shape));
  Tensor t = empty(shape, DType::I64, d);
  if (v.empty()) return t;
  if (d.is_cpu())
    std::memcpy(t.raw_data(), v.data(), v.size() * 8);
  else
    cuda::copy(t.raw_data(), d, v.data(), Device::cpu(), v.size() * 8);
  return t;
}

int64_t Tensor::size(int64_t d) const {
  int64_t n = dim();
  if (d < 0) d += n;
  ENGINE_CHECK(d >= 0 && d < n, "dimension ", d, " out of range for shape ", shape_str(shape()));
  return impl_->shape[d];
}

void* Tensor::raw_data() const {
  ENGINE_CHECK(impl_, "use of an undefined tensor");
  return static_cast<char*>(impl_->storage->data) + impl_->offset_bytes;
}

void Tensor::check_dtype(DType t) const {
  ENGINE_CHECK(impl_, "use of an undefined tensor");
  ENGINE_CHECK(impl_->dtype == t, "tensor holds ", dtype_name(impl_->dtype), ", asked for ",
               dtype_name(t));
}

void Tensor::copy_from(const Tensor& src) {
  ENGINE_CHECK(numel() == src.numel() && dtype() == src.dtype(),
               "copy_from: ", shape_str(src.shape()), " ", dtype_name(src.dtype()), " into ",
               shape_str(shape()), " ", dtype_name(dtype()));
  if (nbytes() == 0) return;
  if (raw_data() == src.raw_data() && device() == src.device()) return;  // the same elements
  if (device().is_cpu() && src.device().is_cpu())
    std::memcpy(raw_data(), src.raw_data(), nbytes());
  else
    cuda::copy(raw_data(), device(), src.raw_data(), src.device(), nbytes());
}

Tensor Tensor::to(Device d) const {
  if (device() == d) return *this;
  Tensor t = empty(shape(), dtype(), d);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape(), dtype(), device());
  t.copy_from(*this);
  return t;
}

Tensor Tensor::view(const Shape& shape) const {
  ENGINE_CHECK(shape_numel(shape) == numel(), "cannot view ", shape_str(this->shape()), " as ",
               shape_str(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->offset_bytes = impl_->offset_bytes;
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = impl_->dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::flat_slice(int64_t offset, int64_t count) const {
  ENGINE_CHECK(offset >= 0 && count >= 0 && offset + count <= numel(), "flat_slice [", offset, ", ",
               offset + count, ") of a tensor of ", numel(), " elements");
  Tensor t = view({numel()});
  t.impl()->offset_bytes += static_cast<size_t>(offset) * dtype_size(dtype());
  t.impl()->shape = {count};
  t.impl()->strides = {1};
  return t;
}

Tensor Tensor::detach() const {
  return view(shape());
}

std::vector<float> Tensor::to_vector() const {
  sync_guard::note("Tensor::to_vector()");
  Tensor c = to(Device::cpu());
  const float* p = c.data<float>();
  return std::vector<float>(p, p + numel());
}

std::vector<int64_t> Tensor::to_vector_i64() const {
  sync_guard::note("Tensor::to_vector_i64()");
  Tensor c = to(Device::cpu());
  const int64_t* p = c.data<int64_t>();
  return std::vector<int64_t>(p, p + numel());
}

float Tensor::item() const {
  ENGINE_CHECK(numel() == 1, "item() of a tensor of shape ", shape_str(shape()));
  sync_guard::note("Tensor::item()");
  return to_vector()[0];
}

void Tensor::fill_(float v) {
  float* p = data<float>();
  if (device().is_cuda()) return cuda::fill_f32(device().index, p, v, numel());
  for (int64_t i = 0, n = numel(); i < n; ++i) p[i] = v;
}

void Tensor::add_(const Tensor& other, float alpha) {
  ENGINE_CHECK(numel() == other.numel(), "add_: ", shape_str(other.shape()), " into ",
               shape_str(shape()));
  ENGINE_CHECK(device() == other.device(), "add_: tensors on ", device().str(), " and ",
               other.device().str());
  float* d = data<float>();
  const float* s = other.data<float>();
  if (device().is_cuda()) return cuda::axpy_f32(device().index, d, s, alpha, numel());
  for (int64_t i = 0, n = numel(); i < n; ++i) d[i] = axpy_op(d[i], s[i], alpha);
}

void Tensor::mul_(float s) {
  float* p = data<float>();
  if (device().is_cuda()) return cuda::scale_f32(device().index, p, s, numel());
  for (int64_t i = 0, n = numel(); i < n; ++i) p[i] = scale_op(p[i], s);
}

Tensor& Tensor::set_requires_grad(bool r) {
  ENGINE_CHECK(!r || dtype() == DType::F32, "only float tensors can require gradients");
  ENGINE_CHECK(is_leaf(), "requires_grad can only be set on leaf tensors");
  impl_->requires_grad = r;
  return *this;
}

void Tensor::backward(const Tensor& grad_output) const {
  Tensor g = grad_output;
  if (!g.defined()) {
    ENGINE_CHECK(numel() == 1, "backward() without a gradient needs a scalar, got shape ",
                 shape_str(shape()));
    g = full(shape(), 1.0f, device());
  }
  run_backward(*this, g);
}

}  // namespace engine
