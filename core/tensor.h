// core/tensor.h: the Tensor handle. Shared storage, a shape with contiguous strides, a dtype and a
// device; autograd state (requires_grad, grad, grad_fn, gradient-ready hooks) for float tensors.
// All tensors the engine makes are contiguous (row-major); reshape shares storage.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "io/dtype.h"

namespace engine {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);  // "(2, 3)"
int64_t shape_numel(const Shape& s);

class Node;

// A block of memory on one device, freed through the device's allocator.
struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  Storage(size_t nbytes, Device d);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

class Tensor;
using GradHook = std::function<void(const Tensor& grad)>;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  size_t offset_bytes = 0;
  Shape shape;
  Shape strides;  // contiguous row-major, in elements
  DType dtype = DType::F32;
  // autograd
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;        // accumulated gradient (leaf tensors)
  std::shared_ptr<Node> grad_fn;           // the op that made this tensor (non-leaf)
  std::shared_ptr<Node> grad_accumulator;  // leaf: the node that accumulates into grad
  std::vector<GradHook> hooks;             // fire when this leaf's grad is final in a backward
  std::string name;                        // optional, for error messages and traces
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // Factories. Memory is uninitialised for empty().
  static Tensor empty(const Shape& shape, DType dt = DType::F32, Device d = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dt = DType::F32, Device d = Device::cpu());
  static Tensor full(const Shape& shape, float value, Device d = Device::cpu());
  static Tensor from_vector(const std::vector<float>& v, const Shape& shape,
                            Device d = Device::cpu());
  static Tensor from_vector_i64(const std::vector<int64_t>& v, const Shape& shape,
                                Device d = Device::cpu());

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl_->shape; }
  const Shape& strides() const { return impl_->strides; }
  int64_t dim() const { return static_cast<int64_t>(impl_->shape.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const { return shape_numel(impl_->shape); }
  size_t nbytes() const { return numel() * dtype_size(impl_->dtype); }
  DType dtype() const { return impl_->dtype; }
  Device device() const { return impl_->storage->device; }

  void* raw_data() const;
  template <class T>
  T* data() const {
    check_dtype(dtype_of<T>());
    return static_cast<T*>(raw_data());
  }

  // Copies (never aliases) onto a device; same-device to() returns *this.
  Tensor to(Device d) const;
  Tensor clone() const;
  // Copies src's elements into this tensor (same numel and dtype, any devices).
  void copy_from(const Tensor& src);
  // A tensor sharing this one's storage with another shape (no autograd; see nn::reshape).
  Tensor view(const Shape& shape) const;
  // Elements [offset, offset + count) of this contiguous tensor as a 1-D tensor sharing storage.
  Tensor flat_slice(int64_t offset, int64_t count) const;
  // The same storage without autograd history.
  Tensor detach() const;

  std::vector<float> to_vector() const;  // F32, any device
  std::vector<int64_t> to_vector_i64() const;
  float item() const;  // one-element F32 tensor

  // In place, no autograd: fill, this += alpha * other, this *= s.
  void fill_(float v);
  void add_(const Tensor& other, float alpha = 1.0f);
  void mul_(float s);

  // Autograd.
  bool requires_grad() const { return impl_->requires_grad; }
  Tensor& set_requires_grad(bool r);
  Tensor grad() const { return Tensor(impl_->grad); }
  void set_grad(const Tensor& g) { impl_->grad = g.impl_; }
  bool is_leaf() const { return impl_->grad_fn == nullptr; }
  const std::shared_ptr<Node>& grad_fn() const { return impl_->grad_fn; }
  void set_grad_fn(std::shared_ptr<Node> fn) { impl_->grad_fn = std::move(fn); }
  // Fires once per backward, when this leaf's gradient has been fully accumulated.
  void register_grad_ready_hook(GradHook h) { impl_->hooks.push_back(std::move(h)); }
  // Runs backward from this scalar (seed 1) or with the given gradient of the same shape.
  void backward(const Tensor& grad_output = Tensor()) const;

  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }

 private:
  void check_dtype(DType t) const;
  std::shared_ptr<TensorImpl> impl_;
};

// Contiguous row-major strides for a shape.
Shape contiguous_strides(const Shape& s);

}  // namespace engine
