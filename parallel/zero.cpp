// parallel/zero.cpp: ZeRO-1's buckets, its sharded step and the state that checkpoints keep.
#include "parallel/zero.h"

#include <string>

#include "core/error.h"
#include "core/trace.h"

namespace engine::parallel {

struct Zero1::Bucket {
  std::vector<size_t> params;   // indices into params_
  std::vector<int64_t> offset;  // of each, in flat
  int64_t count = 0;            // elements of the parameters; flat holds W x shard >= count
  int64_t shard = 0;            // elements per rank
  Tensor flat;                  // (W x shard): gradients, then the gathered parameters
  Tensor shard_param;           // (shard): this rank's slice of the parameters, stepped here
  Tensor shard_grad;            // (shard): the average of every rank's gradients there
};

namespace {

// The reducer side of Zero1: nothing during backward, the reduce_scatter after it.
class ZeroReducer : public comm::GradReducer {
 public:
  explicit ZeroReducer(Zero1& z) : zero_(z) {}
  void begin(int64_t step) override { (void)step; }
  void finish() override { zero_.reduce_scatter(); }
  int64_t bytes_per_step(int64_t step) const override { return zero_.bytes_per_step(); }
  std::string name() const override { return "zero1"; }

 private:
  Zero1& zero_;
};

// "conv1.weight.exp_avg" -> {"conv1.weight", "exp_avg"}: the optimizers' suffixes have no dot.
std::pair<std::string, std::string> split_state_name(const std::string& name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos) return {name, ""};
  return {name.substr(0, dot), name.substr(dot + 1)};
}

}  // namespace

Zero1::Zero1(comm::Communicator& comm, nn::NamedTensors params, size_t bucket_bytes,
             const OptimizerOptions& o, const nn::NamedTensors& full_state, int64_t steps)
    : comm_(comm), params_(std::move(params)), options_(o) {
  ENGINE_CHECK(!params_.empty(), "ZeRO-1: the model has no parameters");
  const Device dev = params_.front().second.device();
  const int64_t world = comm_.size();
  size_t bytes = 0;
  for (size_t i = params_.size(); i-- > 0;) {  // reverse: as bucketed averaging
    const size_t nb = params_[i].second.nbytes();
    if (buckets_.empty() || (bytes > 0 && bytes + nb > bucket_bytes)) {
      buckets_.push_back(std::make_unique<Bucket>());
      bytes = 0;
    }
    Bucket& b = *buckets_.back();
    b.params.push_back(i);
    b.offset.push_back(b.count);
    b.count += params_[i].second.numel();
    bytes += nb;
  }
  nn::NamedTensors shards;
  for (size_t k = 0; k < buckets_.size(); ++k) {
    Bucket& b = *buckets_[k];
    b.shard = (b.count + world - 1) / world;
    b.flat = Tensor::zeros({b.shard * world}, DType::F32, dev);
    b.shard_param = Tensor::empty({b.shard}, DType::F32, dev);
    b.shard_grad = Tensor::zeros({b.shard}, DType::F32, dev);
    pack_params(b);
    b.shard_param.copy_from(b.flat.flat_slice(comm_.rank() * b.shard, b.shard));
    shards.emplace_back("zero" + std::to_string(k), b.shard_param);
  }
  opt_ = make_optimizer(o, shards);
  opt_->load_state(shard_state(full_state), steps);
  full_ = make_optimizer(o, params_);
}

std::unique_ptr<comm::GradReducer> Zero1::make_reducer() {
  return std::make_unique<ZeroReducer>(*this);
}

Zero1::~Zero1() = default;

void Zero1::pack_params(Bucket& b) const {
  b.flat.fill_(0.0f);
  for (size_t j = 0; j < b.params.size(); ++j) {
    const Tensor& p = params_[b.params[j]].second;
    b.flat.flat_slice(b.offset[j], p.numel()).copy_from(p);
  }
}

nn::NamedTensors Zero1::checked() const {
  nn::NamedTensors out;
  for (size_t k = 0; k < buckets_.size(); ++k) {
    std::string name = "zero" + std::to_string(k) + " (ZeRO-1's bucket of";
    for (size_t i : buckets_[k]->params) name += " " + params_[i].first;
    out.emplace_back(name + ")", buckets_[k]->shard_param);
  }
  return out;
}

void Zero1::pack_grads(Bucket& b) const {
  b.flat.fill_(0.0f);  // the padding, and parameters without a gradient this step
  for (size_t j = 0; j < b.params.size(); ++j) {
    const Tensor& g = params_[b.params[j]].second.grad();
    if (g.defined()) b.flat.flat_slice(b.offset[j], g.numel()).copy_from(g);
  }
}

void Zero1::reduce_scatter() {
  for (const auto& b : buckets_) {
    trace::Scope ts("reduce_scatter", "comm");
    ts.arg("bytes", b->flat.nbytes());
    pack_grads(*b);
    comm_.reduce_scatter(b->flat, b->shard_grad, comm::ReduceOp::Avg);
    b->shard_param.set_grad(b->shard_grad);
  }
}

void Zero1::take_shards() {
  for (const auto& b : buckets_) {
    pack_grads(*b);
    b->shard_grad.copy_from(b->flat.flat_slice(comm_.rank() * b->shard, b->shard));
    b->shard_param.set_grad(b->shard_grad);
  }
}

int64_t Zero1::all_gather_bytes() const {
  return bytes_per_step() / 2;
}

void Zero1::step() {
  opt_->step();
  for (const auto& b : buckets_) {
    trace::Scope ts("all_gather", "comm");
    ts.arg("bytes", b->flat.nbytes());
    comm_.all_gather(b->shard_param, b->flat);
    for (size_t j = 0; j < b->params.size(); ++j) {
      Tensor p = params_[b->params[j]].second;
      p.copy_from(b->flat.flat_slice(b->offset[j], p.numel()));
    }
  }
}

// The shards of an unsharded state: for bucket k and each suffix its parameters have, the
// bucket's flat state (zeros in the padding) cut to this rank's shard, as "zero<k>.<suffix>".
nn::NamedTensors Zero1::shard_state(const nn::NamedTensors& full_state) const {
  nn::NamedTensors out;
  for (size_t k = 0; k < buckets_.size(); ++k) {
    const Bucket& b = *buckets_[k];
    std::vector<std::string> suffixes;
    for (const auto& [name, t] : full_state) {
      const auto [param, suffix] = split_state_name(name);
      if (param != params_[b.params.front()].first) continue;
      suffixes.push_back(suffix);
    }
    for (const std::string& suffix : suffixes) {
      Tensor flat = Tensor::zeros(b.flat.shape(), DType::F32, b.flat.device());
      for (size_t j = 0; j < b.params.size(); ++j) {
        const auto& [pname, p] = params_[b.params[j]];
        const std::string key = pname + "." + suffix;
        bool found = false;
        for (const auto& [name, t] : full_state)
          if (name == key) {
            ENGINE_CHECK(t.numel() == p.numel(), "ZeRO-1: optimizer state '", key, "' has ",
                         t.numel(), " elements, the parameter ", p.numel());
            flat.flat_slice(b.offset[j], p.numel()).copy_from(t);
            found = true;
          }
        ENGINE_CHECK(found, "ZeRO-1: optimizer state '", key, "' is missing");
      }
      out.emplace_back("zero" + std::to_string(k) + "." + suffix,
                       flat.flat_slice(comm_.rank() * b.shard, b.shard).clone());
    }
  }
  return out;
}

nn::NamedTensors Zero1::gather_state() {
  nn::NamedTensors out;
  const bool root = comm_.rank() == 0;
  for (const auto& [name, shard] : opt_->state()) {  // the same names on every rank
    const auto [bucket, suffix] = split_state_name(name);
    const Bucket& b = *buckets_[std::stoul(bucket.substr(4))];
    Tensor flat = root ? Tensor::empty(b.flat.shape(), DType::F32, b.flat.device()) : Tensor();
    comm_.gather(shard, flat, 0);
    if (!root) continue;
    for (size_t j = 0; j < b.params.size(); ++j) {
      const auto& [pname, p] = params_[b.params[j]];
      Tensor t = Tensor::empty(p.shape(), DType::F32, p.device());
      t.copy_from(flat.flat_slice(b.offset[j], p.numel()));
      out.emplace_back(pname + "." + suffix, t);
    }
  }
  return out;
}

int64_t Zero1::bytes_per_step() const {
  const int64_t world = comm_.size();
  int64_t n = 0;
  for (const auto& b : buckets_) n += 2 * (world - 1) * b->shard * 4;
  return n;
}

size_t Zero1::state_bytes() const {
  return state_nbytes(opt_->state());
}

const nn::Optimizer& Zero1::gathered() {
  const nn::NamedTensors state = gather_state();
  if (comm_.rank() == 0) {  // the file an unsharded run would write
    full_ = make_optimizer(options_, params_);
    full_->load_state(state, steps());
  }
  return *full_;
}

}  // namespace engine::parallel
