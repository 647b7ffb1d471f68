// apps/train/trainer.cpp: the Trainer's setup and closing phases (connect, build, resume,
// distribute, finish) and run(), which calls every phase in order. The epoch and the step are in
// apps/train/epoch.cpp.
#include "apps/train/trainer.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "apps/train/agreement.h"
#include "apps/train/cuda_collectives.h"
#include "comm/backends/mpi/mpi_world.h"
#include "comm/rendezvous/rendezvous.h"
#include "comm/rendezvous/slurm_env.h"
#include "core/cuda_backend.h"
#include "core/device_choice.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "core/threads.h"
#include "core/trace.h"
#include "data/partition.h"
#include "data/sampler.h"
#include "kernels/choice.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/peak.h"
#include "nn/checkpoint_check.h"
#include "nn/precision.h"
#include "nn/report/profile.h"
#include "nn/sync_batch_norm.h"

namespace engine::apps {
namespace {

// The data's label check (data/mnist.h, labels 0 .. 9) is the models' classes.
static_assert(data::kMnistClasses == nn::kModelClasses);

using Clock = std::chrono::steady_clock;

// --mode dp: the devices one process drives; the first holds the model.
std::vector<Device> dp_devices(const TrainConfig& c) {
  std::vector<Device> devs;
  if (c.dp_devices.empty()) {
    ENGINE_CHECK(c.device != "cpu",
                 "--mode dp on the CPU needs --dp-devices (e.g. cpu,cpu: replicas on the CPU)");
    const int n = cuda_device_count();
    ENGINE_CHECK(n > 0, "--mode dp drives every visible GPU: ", cuda_unavailable_reason(),
                 " (--dp-devices cpu,cpu runs the replicas on the CPU)");
    for (int i = 0; i < n; ++i) devs.push_back(Device::cuda(i));
    return devs;
  }
  for (const std::string& item : split_commas(c.dp_devices)) {
    ENGINE_CHECK(!item.empty(), "--dp-devices '", c.dp_devices, "': empty item");
    devs.push_back(Device::parse(item));
  }
  const bool cuda = devs.front().is_cuda();
  for (const Device& d : devs) {
    ENGINE_CHECK(d.is_cuda() == cuda, "--dp-devices '", c.dp_devices,
                 "': all cpu or all cuda, not both");
    if (d.is_cuda()) check_cuda_device(d.index, "--dp-devices");
  }
  ENGINE_CHECK(c.device == "auto" || (c.device == "cuda") == cuda, "--device ", c.device,
               " and --dp-devices '", c.dp_devices, "' disagree");
  return devs;
}

// Batches in one epoch of this rank (the loader's count: the shard cut into batches of `batch`,
// the last one short).
int64_t rank_batches_per_epoch(const TrainConfig& c, int64_t n, int world, int rank, int64_t batch,
                               const std::vector<int64_t>& partition) {
  const int64_t shard = c.sharding == "partition"
                            ? static_cast<int64_t>(partition.size())
                            : data::DistributedSampler(n, world, rank, c.shuffle == "on",
                                                       static_cast<uint64_t>(c.seed), c.drop_last)
                                  .num_samples();
  return (shard + batch - 1) / batch;
}

// The communicator of this rank, or none when the job is one process.
std::unique_ptr<comm::Communicator> connect_rank(const TrainConfig& c) {
  bool env_job = std::getenv("WORLD_SIZE") || std::getenv("OMPI_COMM_WORLD_SIZE") ||
                 comm::slurm::in_step();  // not an sbatch script's own SLURM_NTASKS
  if (c.init_method == "env://" && c.world_size < 0 && !env_job) return nullptr;
  if (c.world_size == 1) return nullptr;
  comm::InitOptions o;
  o.init_method = c.init_method;
  o.rank = static_cast<int>(c.rank);
  o.world_size = static_cast<int>(c.world_size);
  o.connect.timeout = comm::Millis(static_cast<int64_t>(c.timeout_s * 1000));
  o.connect.transport = comm::transport_kind_from_name(c.transport);
  comm::InitTarget t = comm::resolve_init_method(o);
  if (t.world_size == 1) return nullptr;
  auto comm = comm::connect_communicator(t.store, t.rank, t.world_size, o.connect);
  comm->set_algo(comm::algo_from_name(c.algo));
  return comm;
}

// Each rank writes its events; rank 0 merges them into one file with a track per rank.
void write_trace(const std::string& path, comm::Communicator* comm) {
  trace::disable();
  if (!comm) return trace::write(path);
  std::string part = path + ".rank" + std::to_string(comm->rank());
  trace::write(part);
  comm->barrier();
  if (comm->rank() != 0) return;
  std::vector<std::string> parts;
  for (int r = 0; r < comm->size(); ++r) parts.push_back(path + ".rank" + std::to_string(r));
  trace::merge_files(parts, path);
  for (auto& p : parts) std::remove(p.c_str());
}

}  // namespace

Trainer::Trainer(const TrainConfig& c) : c_(c), progress_(0, false) {
  validate(c_);
}

Trainer::~Trainer() {
  if (c_.sync_bn) nn::set_batch_norm_sync({});  // the reducer refers to comm_
}

void Trainer::run() {
  connect();
  build();
  resume();
  if (c_.eval_only) return evaluate_only();
  distribute();
  if (c_.nonfinite != "off" && zero_)  // each rank's shards: the ranks agree on the verdict
    guard_ = std::make_unique<NonfiniteGuard>(c_.nonfinite, zero_->shards(), device_, rank_,
                                              comm_.get());
  else if (c_.nonfinite != "off")
    guard_ = std::make_unique<NonfiniteGuard>(c_.nonfinite, opt_->params(), device_, rank_);
  if (rank_ == 0 && !c_.metrics.empty())
    metrics_ = std::make_unique<MetricsWriter>(c_.metrics, !resumed_from_.empty());
  if (!c_.trace.empty() || c_.profile) trace::enable(rank_);
  graph_ = make_train_step_graph(c_, graph_settings(), rank_, device_, batch_, mnist_.train.rows,
                                 mnist_.train.cols, &dropout_gen_);
  device_data_ = make_device_data(c_, mnist_.train, device_, dp_ != nullptr, rank_);
  run_start_ = Clock::now();
  for (int64_t epoch = start_.epoch; epoch < c_.epochs && !steps_done(); ++epoch)
    end_epoch(epoch, run_epoch(epoch));
  finish();
}

void Trainer::connect() {
  comm_ = connect_rank(c_);
  // Before any other collective: every rank runs the same settings, or none starts.
  if (comm_) agree(*comm_, config_settings(c_));
  // At once, before the data loads (after agreeing, so that ranks started with different
  // --precision say so rather than one rank's missing CPU feature).
  if (c_.precision == "bf16" &&
      (c_.device == "cpu" || (c_.device == "auto" && cuda_device_count() == 0)))
    kernels::cpu::require_avx512_bf16("--precision bf16");
  ENGINE_CHECK(c_.mode == "ddp" || !comm_,
               "--mode dp is one process driving several devices; this one is rank ",
               comm_ ? comm_->rank() : 0, " of ", comm_ ? comm_->size() : 1,
               ": start it alone, or use --mode ddp");
  rank_ = comm_ ? comm_->rank() : 0;
  world_ = comm_ ? comm_->size() : 1;
  threads_ = c_.threads > 0
                 ? static_cast<int>(c_.threads)
                 : default_threads([](const char* v) { return std::getenv(v); }, usable_cores(),
                                   [] { return comm::slurm::local_task_count(); });
  set_num_threads(threads_);
  progress_ = Progress(rank_, rank_ == 0);
}

void Trainer::build() {
  mnist_ = data::load_mnist(c_.data_dir);
  if (comm_) agree(*comm_, data_settings(mnist_));  // the same data, wherever each rank reads it
  for (const data::MnistSplit* s : {&mnist_.train, &mnist_.test})
    ENGINE_CHECK(s->rows == nn::kModelRows && s->cols == nn::kModelCols, s->images_path, ": ",
                 s->rows, " x ", s->cols, " images; ", c_.model, " needs ", nn::kModelRows, " x ",
                 nn::kModelCols);
  ENGINE_CHECK(c_.batch_size >= world_, "--batch-size ", c_.batch_size,
               " is less than the world size ", world_, ": every rank needs an image per step");
  batch_ = c_.batch_size / world_;  // the tutorial's bsz = int(128 / float(size))
  if (rank_ == 0 && c_.batch_size % world_ != 0 && !c_.eval_only)
    std::printf(
        "--batch-size %lld does not divide by %d ranks: each rank takes int(%lld / %d) = "
        "%lld images per step (%lld in all), as the tutorial does\n",
        static_cast<long long>(c_.batch_size), world_, static_cast<long long>(c_.batch_size),
        world_, static_cast<long long>(batch_), static_cast<long long>(batch_ * world_));
  if (c_.sharding == "partition")
    partition_ = data::partition_for_rank(mnist_.train.count, world_, rank_, 1234);
  if (c_.dropout >= 0) model_options_.dropout = static_cast<float>(c_.dropout);
  init_gen_ = Generator(static_cast<uint64_t>(c_.seed));
  dropout_gen_ = Generator(static_cast<uint64_t>(c_.seed) * 1000003u + 1u + rank_);
  model_ = nn::make_model(c_.model, model_options_, init_gen_, dropout_gen_);
  if (c_.mode == "dp") dp_devices_ = dp_devices(c_);
  if (c_.mode == "dp") {
    device_ = dp_devices_.front();
  } else {
    const DeviceChoice d =
        pick_device(c_.device, cuda_device_count(), cuda_unavailable_reason(),
                    comm_ ? comm_->local_rank() : 0, comm_ ? comm_->local_size() : 1, rank_);
    if (rank_ == 0 && !d.notice.empty()) std::printf("%s\n", d.notice.c_str());
    device_ = d.device;
  }
  // This thread and the communicator's work on the rank's device from now on (no context on
  // any other GPU).
  if (device_.is_cuda()) cuda::set_home_device(device_.index);
  const nn::Precision precision = c_.precision == "bf16" ? nn::Precision::BF16 : nn::Precision::F32;
  if (precision == nn::Precision::BF16 && device_.is_cpu())
    kernels::cpu::require_avx512_bf16("--precision bf16");  // --mode dp on CPUs, --device auto
  nn::set_matmul_precision(precision);
  kernels::set_cuda_kernels(kernels::parse_cuda_kernels(c_.cuda_kernels));  // CPU: no effect
  if (rank_ == 0 && precision == nn::Precision::BF16 && !c_.eval_only)
    std::printf(
        "Precision bf16: conv2d and linear multiply bf16 operands with fp32 sums (one-channel "
        "convolutions and linear layers under 16 outputs or 8192 weights stay fp32); weights, "
        "optimizer, BatchNorm, softmax and loss in fp32\n");
  model_->to(device_);
  if (!c_.init_from.empty()) {
    nn::load_state_dict(c_.init_from, *model_);
    refuse_nonfinite(model_->state_dict(), "--init-from " + c_.init_from);
  }
  opt_ = make_optimizer(c_, model_->named_parameters());
}

// --resume FILE; --resume auto: --checkpoint if rank 0 finds it (every rank follows rank 0's
// answer, so a job never half-resumes); "" to start fresh.
std::string Trainer::resume_path() {
  if (!resume_is_auto(c_)) return c_.resume;
  int64_t found = rank_ == 0 && std::filesystem::exists(c_.checkpoint) ? 1 : 0;
  if (comm_) comm_->broadcast(&found, 1, DType::I64, 0);
  ENGINE_CHECK(found || !c_.eval_only, "--eval-only --resume auto: no checkpoint at ",
               c_.checkpoint);
  if (rank_ == 0 && !found)
    std::printf("--resume auto: no checkpoint at %s yet, starting fresh\n", c_.checkpoint.c_str());
  std::fflush(stdout);  // a restart may kill this rank: what it said must be out
  return found ? c_.checkpoint : "";
}

void Trainer::resume() {
  resumed_from_ = resume_path();
  if (resumed_from_.empty()) return;
  start_ = nn::load_training_checkpoint(resumed_from_, *model_, *opt_);
  refuse_nonfinite(model_->state_dict(), "--resume " + resumed_from_);
  refuse_nonfinite(opt_->state(), "--resume " + resumed_from_ + " (optimizer state)");
  nn::ResumeRun run;
  run.model = c_.model;
  run.seed = c_.seed;
  run.epochs = c_.epochs;
  run.batches_per_epoch =
      rank_batches_per_epoch(c_, mnist_.train.count, world_, rank_, batch_, partition_);
  run.optimizer_steps = opt_->steps();
  run.dp_replicas = dp_devices_.empty() ? 0 : dp_devices_.size() - 1;
  nn::check_resume_position(resumed_from_, start_, run);
  pos_ = start_;
  // Each rank keeps its own dropout seed; all ranks draw the same number of values per step.
  dropout_gen_.set_state(dropout_gen_.seed(), start_.dropout_offset);
  if (rank_ == 0 && !c_.eval_only)
    std::printf("Resumed from %s at epoch %lld, batch %lld, step %lld\n", resumed_from_.c_str(),
                static_cast<long long>(start_.epoch), static_cast<long long>(start_.batch_in_epoch),
                static_cast<long long>(start_.step));
  std::fflush(stdout);
}

void Trainer::distribute() {
  if (c_.mode == "dp") {
    dp_ = std::make_unique<nn::DataParallel>(*model_, dp_devices_,
                                             nn::model_factory(c_.model, model_options_),
                                             static_cast<uint64_t>(c_.seed) * 1000003u + 7u);
    dp_->restore_replica_dropout_offsets(start_.replica_dropout_offsets);
    std::printf("DataParallel over %zu devices:", dp_devices_.size());
    for (const Device& d : dp_devices_) std::printf(" %s", d.str().c_str());
    std::printf(" (batch %lld cut along dim 0, outputs gathered on %s)\n",
                static_cast<long long>(c_.batch_size), dp_devices_.front().str().c_str());
  }
  buffers_ = model_->named_buffers();
  if (!comm_) return;
  const std::string cuda_path = attach_cuda_collectives(c_, *comm_, device_);
  // Every rank starts from rank 0's parameters and buffers.
  comm::broadcast_tensors(*comm_, model_->state_dict(), 0);
  if (c_.sync_bn)
    nn::set_batch_norm_sync([comm = comm_.get()](const Tensor& sums) {
      trace::Scope ts("sync batch norm", "comm");
      comm->all_reduce(sums, comm::ReduceOp::Sum);
    });
  const size_t bucket_bytes = static_cast<size_t>(c_.bucket_mb * (1 << 20));
  if (const int64_t r = powersgd_rank(c_); r > 0) {
    powersgd_ =
        std::make_unique<comm::PowerSgd>(*comm_, model_->named_parameters(), static_cast<int>(r),
                                         c_.powersgd_start, static_cast<uint64_t>(c_.seed));
    powersgd_->load_state(start_.comm_state);
  } else if (c_.grad_compression == "bf16" || c_.grad_compression == "fp16") {
    half_ = std::make_unique<comm::HalfGradSync>(
        *comm_, model_->named_parameters(),
        c_.grad_compression == "bf16" ? DType::BF16 : DType::F16);
  } else if (c_.zero == 1) {
    zero_ = std::make_unique<Zero1>(
        *comm_, model_->named_parameters(), bucket_bytes,
        [this](nn::NamedTensors p) { return make_optimizer(c_, std::move(p)); }, opt_->state(),
        opt_->steps());
    opt_ = make_optimizer(c_, model_->named_parameters());  // no state: zero_ holds the shards
  } else {
    sync_ = std::make_unique<comm::GradSync>(*comm_, model_->named_parameters(),
                                             comm::sync_mode_from_name(c_.sync), bucket_bytes);
  }
  if (rank_ != 0) return;
  const std::string how = comm_->host_path() == "mpi" ? "mpi (" + comm::mpi_library_version() + ")"
                                                      : "ring over " + comm_->transport_kind();
  std::printf(
      "World %d: %s, sync %s, sharding %s, %lld images per rank per step, "
      "%d threads per rank\n",
      world_, how.c_str(), c_.sync.c_str(), c_.sharding.c_str(), static_cast<long long>(batch_),
      threads_);
  if (const std::string on = options_line(c_); !on.empty()) std::printf("%s\n", on.c_str());
  if (!cuda_path.empty())
    std::printf("CUDA tensors: %s, rank r on cuda:LOCAL_RANK (cuda:0 where a rank sees one GPU)\n",
                cuda_path.c_str());
  if (comm_->uses_two_level())
    std::printf(
        "All-reduce in two levels: %d hosts (reduce on each, all_reduce among their "
        "leaders, broadcast)\n",
        comm_->num_hosts());
}

// --profile's table; on the CPU with each layer's share of the FMA peak of this rank's threads,
// measured now that the timed steps are over.
void Trainer::print_profile() {
  double peak = 0;
  if (device_.is_cpu()) peak = kernels::cpu::measure_peak(threads_).fp32_gflops;
  std::printf("%s", nn::profile_table(trace::to_json(), peak, threads_).c_str());
}

void Trainer::refuse_nonfinite(const nn::NamedTensors& ts, const std::string& what) const {
  if (c_.nonfinite == "off") return;
  const std::string bad = first_nonfinite(ts);
  ENGINE_CHECK(bad.empty(), what, ": tensor '", bad, "' holds inf or NaN (refused by --nonfinite ",
               c_.nonfinite, ")");
}

void Trainer::finish() {
  // Every rank checks (the weights are equal everywhere), so that every rank stops alike.
  if (!c_.save.empty())
    refuse_nonfinite(model_->state_dict(), "--save " + c_.save + " after step " +
                                               std::to_string(pos_.step) + ": not written");
  if (rank_ == 0 && !c_.save.empty()) nn::save_state_dict(c_.save, *model_);
  if (c_.profile && rank_ == 0) print_profile();
  if (!c_.trace.empty()) write_trace(c_.trace, comm_.get());
  trace::disable();
  if (comm_) comm_->barrier();  // nobody leaves while a peer may still need it
}

std::unique_ptr<nn::Optimizer> make_optimizer(const TrainConfig& c, nn::NamedTensors params) {
  if (c.optimizer == "adam") {
    kernels::AdamConfig a;
    a.lr = c.lr;
    return std::make_unique<nn::Adam>(std::move(params), a);
  }
  kernels::SgdConfig s;
  s.lr = c.lr;
  s.momentum = c.momentum;
  return std::make_unique<nn::SGD>(std::move(params), s);
}

void run_training(const TrainConfig& c) {
  Trainer t(c);
  t.run();
}

}  // namespace engine::apps
