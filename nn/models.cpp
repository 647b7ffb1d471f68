// nn/models.cpp: the four models of the tutorials.
#include "nn/models.h"

#include "core/error.h"
#include "nn/functional.h"
#include "nn/layers.h"

namespace engine::nn {
namespace {

float pick(const ModelOptions& o, float p) {
  return o.dropout ? *o.dropout : p;
}

// seed 000: conv(3x3) -> pool -> relu, twice; dropout; fc 3136->128; relu; dropout; fc 128->10.
class SimpleCNN : public Model {
 public:
  SimpleCNN(const ModelOptions& o, Generator& g, Generator& dg) {
    conv1 = register_module("conv1", std::make_shared<Conv2d>(1, 32, 3, 1, 1, g));
    conv2 = register_module("conv2", std::make_shared<Conv2d>(32, 64, 3, 1, 1, g));
    dropout1 = register_module("dropout1", std::make_shared<Dropout>(pick(o, 0.25f), dg));
    dropout2 = register_module("dropout2", std::make_shared<Dropout>(pick(o, 0.5f), dg));
    fc1 = register_module("fc1", std::make_shared<Linear>(64 * 7 * 7, 128, g));
    fc2 = register_module("fc2", std::make_shared<Linear>(128, 10, g));
    conv1->pool_output(2, 2, true);  // conv1 pools its own output (conv2d_pool)
  }
  Tensor forward(const Tensor& x) override {        // x (N, 1, 28, 28)
    Tensor h = (*conv1)(x);                         // relu(pool(conv1)): (N, 32, 14, 14)
    h = max_pool2d_relu((*conv2)(h), 2, 2);         // (N, 64, 7, 7)
    h = (*dropout1)(reshape(h, {-1, 64 * 7 * 7}));  // (N, 3136)
    h = (*dropout2)(relu((*fc1)(h)));               // (N, 128)
    return log_softmax((*fc2)(h));                  // (N, 10)
  }
  Tensor loss(const Tensor& s, const Tensor& t) override { return nll_loss(s, t); }
  std::shared_ptr<Conv2d> conv1, conv2;
  std::shared_ptr<Dropout> dropout1, dropout2;
  std::shared_ptr<Linear> fc1, fc2;
};

// seed 002: two (conv 5x5 p2, batchnorm, relu, maxpool) blocks, fc 1568->10, cross-entropy.
// Sequential runs each block's relu and maxpool as one pass (max_pool2d_relu).
class ConvNet : public Model {
 public:
  ConvNet(Generator& g) {
    layer1 = register_module("layer1", block(1, 16, g));
    layer2 = register_module("layer2", block(16, 32, g));
    fc = register_module("fc", std::make_shared<Linear>(7 * 7 * 32, 10, g));
  }
  Tensor forward(const Tensor& x) override {  // x (N, 1, 28, 28)
    Tensor h = (*layer2)((*layer1)(x));       // (N, 32, 7, 7)
    return (*fc)(flatten(h));                 // (N, 10) logits
  }
  Tensor loss(const Tensor& s, const Tensor& t) override { return cross_entropy(s, t); }

 private:
  static std::shared_ptr<Sequential> block(int64_t cin, int64_t cout, Generator& g) {
    auto s = std::make_shared<Sequential>();
    s->add(std::make_shared<Conv2d>(cin, cout, 5, 1, 2, g));
    s->add(std::make_shared<BatchNorm2d>(cout));
    s->add(std::make_shared<ReLU>());
    s->add(std::make_shared<MaxPool2d>(2, 2));
    return s;
  }
  std::shared_ptr<Sequential> layer1, layer2;
  std::shared_ptr<Linear> fc;
};

// seed 004: conv 5x5 ->pool->relu; conv 5x5 -> dropout2d -> pool -> relu; fc 320->50; relu;
// dropout; fc 50->10; log_softmax.
class Net : public Model {
 public:
  Net(const ModelOptions& o, Generator& g, Generator& dg) : p_(pick(o, 0.5f)), dgen_(dg) {
    conv1 = register_module("conv1", std::make_shared<Conv2d>(1, 10, 5, 1, 0, g));
    conv2 = register_module("conv2", std::make_shared<Conv2d>(10, 20, 5, 1, 0, g));
    conv2_drop = register_module("conv2_drop", std::make_shared<Dropout2d>(pick(o, 0.5f), dg));
    fc1 = register_module("fc1", std::make_shared<Linear>(320, 50, g));
    fc2 = register_module("fc2", std::make_shared<Linear>(50, 10, g));
    conv1->pool_output(2, 2, true);  // conv1 pools its own output (conv2d_pool)
  }
  Tensor forward(const Tensor& x) override {                // x (N, 1, 28, 28)
    Tensor h = (*conv1)(x);                                 // relu(pool(conv1)): (N, 10, 12, 12)
    h = max_pool2d_relu((*conv2_drop)((*conv2)(h)), 2, 2);  // (N, 20, 4, 4)
    h = relu((*fc1)(reshape(h, {-1, 320})));                // (N, 50)
    h = dropout(h, p_, is_training(), dgen_);               // F.dropout(training=...)
    return log_softmax((*fc2)(h));                          // (N, 10)
  }
  Tensor loss(const Tensor& s, const Tensor& t) override { return nll_loss(s, t); }
  std::shared_ptr<Conv2d> conv1, conv2;
  std::shared_ptr<Dropout2d> conv2_drop;
  std::shared_ptr<Linear> fc1, fc2;

 private:
  float p_;
  Generator& dgen_;
};

// One linear layer on the flattened image, cross-entropy. Its state_dict keys are those of a bare
// nn.Linear(784, 10): "weight" and "bias".
class LinearModel : public Model {
 public:
  explicit LinearModel(Generator& g) {
    Linear init(784, 10, g);
    weight = register_parameter("weight", init.weight.detach());
    bias = register_parameter("bias", init.bias.detach());
  }
  Tensor forward(const Tensor& x) override { return linear(flatten(x), weight, bias); }  // (N, 10)
  int64_t flops(const Tensor& x) const override { return 2 * x.size(0) * 784 * 10; }
  Tensor loss(const Tensor& s, const Tensor& t) override { return cross_entropy(s, t); }
  Tensor weight, bias;
};

}  // namespace

const char* model_names() {
  return "simplecnn|convnet|net|linear";
}

std::unique_ptr<Model> make_model(const std::string& name, const ModelOptions& o, Generator& g,
                                  Generator& dg) {
  if (name == "simplecnn") return std::make_unique<SimpleCNN>(o, g, dg);
  if (name == "convnet") return std::make_unique<ConvNet>(g);
  if (name == "net") return std::make_unique<Net>(o, g, dg);
  if (name == "linear") return std::make_unique<LinearModel>(g);
  ENGINE_FAIL("unknown model '", name, "': expected ", model_names());
}

}  // namespace engine::nn
