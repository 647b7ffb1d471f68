// nn/parallel_ops.cpp: narrow0, to_device and cat0 with their backward Nodes.
// All engine tensors are contiguous, so a row range along dim 0 is one flat range of elements:
// slicing is a view, and concatenation is one copy_from per input (copy_from crosses devices).
#include "nn/parallel_ops.h"

#include <string>
#include <utility>

#include "core/autograd.h"
#include "core/error.h"
#include "nn/lambda_node.h"

namespace engine::nn {
namespace {

using detail::needs;
using detail::record;

// Elements per row along dim 0 (the product of the trailing dimensions).
int64_t row_numel(const Shape& s) {
  return shape_numel(Shape(s.begin() + 1, s.end()));
}

void check_grad(const char* op, const Tensor& g, const Shape& shape, Device d) {
  ENGINE_CHECK(g.defined() && g.device() == d && g.numel() == shape_numel(shape), op, ": gradient ",
               g.defined() ? shape_str(g.shape()) + " on " + g.device().str() : "",
               " does not match the output ", shape_str(shape), " on ", d.str());
}

}  // namespace

Tensor narrow0(const Tensor& x, int64_t start, int64_t length) {
  ENGINE_CHECK(x.defined(), "narrow0: input is undefined");
  ENGINE_CHECK(x.dim() >= 1, "narrow0: input must have at least one dimension, got a scalar");
  const int64_t n = x.size(0);
  ENGINE_CHECK(start >= 0 && length >= 0 && start + length <= n, "narrow0: rows [", start, ", ",
               start + length, ") of an input of shape ", shape_str(x.shape()));
  const int64_t row = row_numel(x.shape());
  Shape shape = x.shape();
  shape[0] = length;
  Tensor y = x.flat_slice(start * row, length * row).view(shape);
  record(y, "Narrow0Backward", {x},
         [xs = x.shape(), shape, start, row, dev = x.device()](const Tensor& g) {
           check_grad("narrow0", g, shape, dev);
           Tensor dx = Tensor::zeros(xs, DType::F32, dev);
           dx.flat_slice(start * row, g.numel()).copy_from(g);
           return std::vector<Tensor>{dx};
         });
  return y;
}

Tensor to_device(const Tensor& x, Device d) {
  ENGINE_CHECK(x.defined(), "to_device: input is undefined");
  if (x.device() == d) return x;
  Tensor y = x.detach().to(d);
  record(y, "ToDeviceBackward", {x}, [src = x.device(), d, shape = x.shape()](const Tensor& g) {
    check_grad("to_device", g, shape, d);
    return std::vector<Tensor>{g.to(src)};
  });
  return y;
}

Tensor cat0(const std::vector<Tensor>& xs, Device d) {
  ENGINE_CHECK(!xs.empty(), "cat0: no tensors to concatenate");
  for (size_t i = 0; i < xs.size(); ++i) {
    ENGINE_CHECK(xs[i].defined(), "cat0: tensor ", i, " is undefined");
    ENGINE_CHECK(xs[i].dim() >= 1, "cat0: tensor ", i, " is a scalar");
  }
  const Shape& first = xs[0].shape();
  const Shape tail(first.begin() + 1, first.end());
  int64_t rows = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Shape& s = xs[i].shape();
    ENGINE_CHECK(Shape(s.begin() + 1, s.end()) == tail && xs[i].dtype() == xs[0].dtype(),
                 "cat0: tensor ", i, " is ", shape_str(s), " ", dtype_name(xs[i].dtype()),
                 ", tensor 0 is ", shape_str(first), " ", dtype_name(xs[0].dtype()),
                 " (all but dim 0 must match)");
    rows += s[0];
  }
  Shape shape = first;
  shape[0] = rows;
  Tensor y = Tensor::empty(shape, xs[0].dtype(), d);
  int64_t offset = 0;
  for (const Tensor& x : xs) {
    y.flat_slice(offset, x.numel()).copy_from(x);
    offset += x.numel();
  }
  // The backward keeps each input's shape and device, not the input itself (its storage).
  struct Part {
    Shape shape;
    Device device;
    bool needs;
  };
  std::vector<Part> parts;
  for (const Tensor& x : xs) parts.push_back({x.shape(), x.device(), needs(x)});
  record(y, "Cat0Backward", xs, [parts = std::move(parts), shape, d](const Tensor& g) {
    check_grad("cat0", g, shape, d);
    std::vector<Tensor> grads(parts.size());
    int64_t offset = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      const int64_t count = shape_numel(parts[i].shape);
      // Where the input lives on d this is a view of g: run_backward clones before adding to it.
      if (parts[i].needs)
        grads[i] = g.flat_slice(offset, count).view(parts[i].shape).to(parts[i].device);
      offset += count;
    }
    return grads;
  });
  return y;
}

}  // namespace engine::nn
