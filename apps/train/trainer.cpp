// apps/train/trainer.cpp: the Trainer's setup and closing phases (connect, build, resume,
// distribute, finish) and run(), which calls every phase in order. The epoch and the step are in
// apps/train/epoch.cpp.
#include "apps/train/trainer.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "apps/train/options.h"
#include "comm/backends/mpi/mpi_world.h"
#include "comm/grad_sync.h"
#include "comm/health/flight_recorder.h"
#include "comm/rendezvous/rendezvous.h"
#include "comm/rendezvous/slurm_env.h"
#include "core/cuda_backend.h"
#include "core/device_choice.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "core/threads.h"
#include "core/trace.h"
#include "kernels/choice.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/peak.h"
#include "nn/checkpoint_check.h"
#include "nn/precision.h"
#include "nn/sync_batch_norm.h"
#include "parallel/agreement.h"
#include "parallel/nonfinite.h"
#include "parallel/rank_trace.h"
#include "report/profile.h"

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

comm::ConnectOptions connect_options(const TrainConfig& c) {
  comm::ConnectOptions o;
  o.timeout = comm::Millis(static_cast<int64_t>(c.timeout_s * 1000));
  o.transport = comm::transport_kind_from_name(c.transport);
  return o;
}

comm::InitOptions init_options(const TrainConfig& c) {
  comm::InitOptions o;
  o.init_method = c.init_method;
  o.rank = static_cast<int>(c.rank);
  o.world_size = static_cast<int>(c.world_size);
  o.connect = connect_options(c);
  return o;
}

// The communicator of this rank, or none when the job is one process.
std::unique_ptr<comm::Communicator> connect_rank(const TrainConfig& c) {
  auto comm = comm::join_job(init_options(c));
  if (comm) comm->set_algo(comm::algo_from_name(c.algo));
  return comm;
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
  if (newcomer_) {
    build();
    if (!arrive()) return;
    distribute();
  } else {
    set_up();
  }
  if (c_.eval_only) return evaluate_only();
  if (rank_ == 0 && !c_.metrics.empty() && !metrics_)
    metrics_ = std::make_unique<MetricsWriter>(c_.metrics, !resumed_from_.empty());
  if (!c_.trace.empty() || c_.profile) trace::enable(rank_);
  choose_gpu_step();
  run_start_ = Clock::now();
  train();
}

void Trainer::train() {
  while (true) {
    bool admission = false;
    try {
      for (int64_t e = start_.epoch; e < c_.epochs && (!steps_done() || redo_epoch_end_); ++e) {
        redo_epoch_end_ = false;
        end_epoch(e, run_epoch(e));
        keep_boundary(e + 1, 0);
      }
      return finish();
    } catch (const parallel::Admission&) {
      admission = true;
    } catch (const Error&) {
      if (!elastic_ || !parallel::Elastic::lost_a_member(comm_.get())) throw;
    }
    change_membership(admission);
  }
}

void Trainer::change_membership(bool admission) {
  opt_ = parallel::make_optimizer(optimizer_options(c_), model_->named_parameters());
  const nn::Optimizer& now = step_->optimizer().gathered();
  parallel::Elastic::Handover h = admission
                                      ? elastic_->admit(boundary_, *model_, now, *opt_)
                                      : elastic_->hand_over(*comm_, boundary_, *model_, now, *opt_);
  step_.reset();  // its reducer refers to the old communicator
  adopt(std::move(h));
  distribute();
}

void Trainer::adopt(parallel::Elastic::Handover h) {
  comm_ = std::move(h.group.comm);
  comm_->set_algo(comm::algo_from_name(c_.algo));
  rank_ = comm_->rank();
  world_ = comm_->size();
  comm::set_flight_dump("", rank_, world_);
  start_ = pos_ = h.pos;
  if (!c_.world_invariant)  // each rank summed its own
    start_.epoch_loss_sums = pos_.epoch_loss_sums =
        parallel::members_loss_sums(*comm_, boundary_.position().epoch_loss_sums);
  dropout_gen_.set_state(dropout_gen_.seed(), pos_.dropout_offset);
  redo_epoch_end_ = steps_done() && start_.batch_in_epoch > 0;
  shard_data();
  progress_ = Progress(rank_, rank_ == 0);
  trace::instant("membership: " + std::to_string(world_) + " ranks", "comm");
  if (rank_ != 0) metrics_.reset();  // rank 0 writes them, whoever it is now
  if (rank_ == 0 && !metrics_ && !c_.metrics.empty())
    metrics_ = std::make_unique<MetricsWriter>(c_.metrics, true);
  if (rank_ == 0)
    report::print_regroup({h.group.lost, h.group.joined, h.group.membership.ids, h.group.reasons,
                           pos_.step, h.source, h.bytes, h.ms});
}

bool Trainer::arrive() {
  if (!elastic_) {
    std::printf("The job finished before this rank could join it\n");
    return false;
  }
  adopt(elastic_->arrive(*model_, *opt_));
  return true;
}

void Trainer::set_up() {
  while (true) {
    try {
      // Before any other collective: every rank runs the same settings, or none starts.
      if (comm_) parallel::agree(*comm_, config_settings(c_));
      // At once, before the data loads (after agreeing, so that ranks started with different
      // --precision say so rather than one rank's missing CPU feature).
      if (c_.precision == "bf16" &&
          (c_.device == "cpu" || (c_.device == "auto" && cuda_device_count() == 0)))
        kernels::cpu::require_avx512_bf16("--precision bf16");
      build();
      resume();
      if (!c_.eval_only) distribute();
      return;
    } catch (const Error&) {
      if (!elastic_ || !parallel::Elastic::lost_a_member(comm_.get())) throw;
    }
    step_.reset();  // its reducer refers to the old communicator
    start_without(elastic_->regroup(comm_->transport().broken_reason()));
  }
}

void Trainer::start_without(parallel::Regrouped g) {
  comm_ = std::move(g.comm);
  comm_->set_algo(comm::algo_from_name(c_.algo));
  rank_ = comm_->rank();
  world_ = comm_->size();
  comm::set_flight_dump("", rank_, world_);
  elastic_->started();
  progress_ = Progress(rank_, rank_ == 0);
  if (rank_ == 0)
    report::print_regroup({g.lost, g.joined, g.membership.ids, g.reasons, -1, -1, 0, 0});
}

// --on-rank-loss continue: a member of generation 0, or a newcomer (parallel::Elastic::enter).
void Trainer::enter_job() {
  const char* agent = std::getenv("ENGINE_AGENT_STORE");
  parallel::Entry e =
      parallel::Elastic::enter(init_options(c_), agent && std::string(agent) == "1");
  elastic_ = std::move(e.elastic);
  newcomer_ = e.newcomer;
  if (e.regrouped) return start_without(std::move(*e.regrouped));
  comm_ = std::move(e.comm);
  if (comm_) comm_->set_algo(comm::algo_from_name(c_.algo));
  rank_ = e.rank;
  world_ = e.world;
}

void Trainer::connect() {
  if (c_.on_rank_loss == "continue")
    enter_job();
  else
    comm_ = connect_rank(c_);
  ENGINE_CHECK(c_.mode == "ddp" || !comm_,
               "--mode dp is one process driving several devices; this one is rank ",
               comm_ ? comm_->rank() : 0, " of ", comm_ ? comm_->size() : 1,
               ": start it alone, or use --mode ddp");
  if (c_.on_rank_loss != "continue") {  // enter_job set them (a newcomer: its launcher's)
    rank_ = comm_ ? comm_->rank() : 0;
    world_ = comm_ ? comm_->size() : 1;
  }
  if (!c_.flight_recorder.empty()) {
    comm::set_flight_dump(c_.flight_recorder, rank_, world_);
    comm::install_flight_signals();
  }
  threads_ = c_.threads > 0
                 ? static_cast<int>(c_.threads)
                 : default_threads([](const char* v) { return std::getenv(v); }, usable_cores(),
                                   [] { return comm::slurm::local_task_count(); });
  set_num_threads(threads_);
  progress_ = Progress(rank_, rank_ == 0);
}

void Trainer::build() {
  mnist_ = data::load_mnist(c_.data_dir);
  if (comm_)
    parallel::agree(*comm_,
                    parallel::data_settings(mnist_));  // the same data, wherever each rank reads it
  for (const data::MnistSplit* s : {&mnist_.train, &mnist_.test})
    ENGINE_CHECK(s->rows == nn::kModelRows && s->cols == nn::kModelCols, s->images_path, ": ",
                 s->rows, " x ", s->cols, " images; ", c_.model, " needs ", nn::kModelRows, " x ",
                 nn::kModelCols);
  shard_data();
  if (c_.dropout >= 0) model_options_.dropout = static_cast<float>(c_.dropout);
  init_gen_ = Generator(static_cast<uint64_t>(c_.seed));
  // Each rank its own dropout stream; world-invariant: one stream, drawn by global position.
  dropout_gen_ = Generator(static_cast<uint64_t>(c_.seed) * 1000003u + 1u +
                           (c_.world_invariant ? 0u : static_cast<uint64_t>(rank_)));
  model_ = nn::make_model(c_.model, model_options_, init_gen_, dropout_gen_);
  if (c_.mode == "dp") {
    dp_devices_ = dp_devices(c_);
    device_ = dp_devices_.front();
  } else {
    const DeviceChoice d =
        pick_device(c_.device, cuda_device_count(), cuda_unavailable_reason(),
                    comm_ ? comm_->local_rank() : 0, comm_ ? comm_->local_size() : 1, rank_);
    if (rank_ == 0 && !d.notice.empty()) std::printf("%s\n", d.notice.c_str());
    device_ = d.device;
  }
  ENGINE_CHECK(!c_.world_invariant || device_.is_cpu(), "--world-invariant runs on the CPU for ",
               "now; this rank chose ", device_.str(), " (--device cpu)");
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
  opt_ = parallel::make_optimizer(optimizer_options(c_), model_->named_parameters());
}

void Trainer::shard_data() {
  ENGINE_CHECK(c_.batch_size >= world_, "--batch-size ", c_.batch_size,
               " is less than the world size ", world_, ": every rank needs an image per step");
  parallel::ShardOptions so;
  so.partition = c_.sharding == "partition";
  so.shuffle = c_.shuffle == "on";
  so.seed = static_cast<uint64_t>(c_.seed);
  so.drop_last = c_.drop_last;
  so.global_batch = c_.world_invariant ? c_.batch_size : 0;
  shard_ = parallel::RankShard(so, mnist_.train.count, world_, rank_);
  // The tutorial's bsz = int(128 / float(size)); world-invariant: this rank's whole chunks.
  batch_ = c_.world_invariant ? shard_.share() : c_.batch_size / world_;
  if (rank_ == 0 && c_.batch_size % world_ != 0 && !c_.eval_only && !c_.world_invariant)
    std::printf(
        "--batch-size %lld does not divide by %d ranks: each rank takes int(%lld / %d) = "
        "%lld images per step (%lld in all), as the tutorial does\n",
        static_cast<long long>(c_.batch_size), world_, static_cast<long long>(c_.batch_size),
        world_, static_cast<long long>(batch_), static_cast<long long>(batch_ * world_));
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
  run.batches_per_epoch = shard_.batches_per_epoch(batch_);
  run.optimizer_steps = opt_->steps();
  run.dp_replicas = dp_devices_.empty() ? 0 : dp_devices_.size() - 1;
  if (!c_.eval_only) {  // --eval-only goes on from no position: any world size evaluates it
    run.world_size = world_;
    run.batch_size = c_.batch_size;
    run.world_invariant = c_.world_invariant;
  }
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
  std::string cuda_path;
  if (comm_) {
    cuda_path = attach_collectives();
    // Every rank starts from rank 0's parameters and buffers.
    comm::broadcast_tensors(*comm_, model_->state_dict(), 0);
    if (c_.sync_bn)
      nn::set_batch_norm_sync([comm = comm_.get()](const Tensor& sums) {
        trace::Scope ts("sync batch norm", "comm");
        comm->all_reduce(sums, comm::ReduceOp::Sum);
      });
  }
  parallel::Synchronisation sync =
      parallel::make_synchronisation(comm_.get(), model_->named_parameters(), reducer_options(c_),
                                     optimizer_options(c_), std::move(opt_));
  sync.reducer->load_state(start_.comm_state);
  step_ = std::make_unique<parallel::TrainStep>(*model_, std::move(sync), nonfinite_mode(c_),
                                                device_, rank_, pos_.step);
  if (dp_) step_->replicate(*dp_);
  // As DDP (broadcast_buffers=True): rank 0's BatchNorm statistics go to every rank; under
  // --sync-bn and --world-invariant they are equal everywhere already.
  if (comm_ && !c_.sync_bn && !c_.world_invariant)
    step_->broadcast_buffers(*comm_, model_->named_buffers());
  if (comm_ && rank_ == 0) print_world(cuda_path);
}

std::string Trainer::attach_collectives() {
  try {
    return parallel::attach_cuda_collectives(collective_options(c_), *comm_, device_);
  } catch (const parallel::CollectivesRefused& e) {
    ENGINE_FAIL(collectives_refusal(e, rank_));
  }
}

void Trainer::print_world(const std::string& cuda_path) const {
  const std::string how = comm_->host_path() == "mpi" ? "mpi (" + comm::mpi_library_version() + ")"
                                                      : "ring over " + comm_->transport_kind();
  std::printf(
      "World %d: %s, sync %s, sharding %s, %lld images per rank per step, "
      "%d threads per rank\n",
      world_, how.c_str(), c_.world_invariant ? "tree" : c_.sync.c_str(),
      c_.world_invariant ? "global order" : c_.sharding.c_str(), static_cast<long long>(batch_),
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

void Trainer::choose_gpu_step() {
  std::string collectives;
  if (comm_)
    collectives = c_.backend == "ring" ? "ring over " + comm_->transport_kind() : c_.backend;
  const parallel::GraphChoice g = parallel::choose_step_graph(
      auto_on_off(c_.cuda_graph), step_settings(c_, device_, world_, collectives));
  ENGINE_USAGE_CHECK(!g.refused,
                     "ENGINE_CUDA_GRAPH=on: the step cannot be captured: ", graph_reason(g, c_),
                     " (ENGINE_CUDA_GRAPH=auto runs it eagerly)");
  if (g.on)
    step_->capture(std::make_unique<parallel::TrainStepGraph>(
        parallel::make_cuda_graph_backend(device_.index), device_, batch_, mnist_.train.rows,
        mnist_.train.cols, &dropout_gen_));
  else if (rank_ == 0 && c_.cuda_graph != "off" && device_.is_cuda())  // the CPU: nothing to say
    std::printf("CUDA graph: off (%s)\n", graph_reason(g, c_).c_str());
  parallel::DeviceData d = parallel::make_device_data(auto_on_off(c_.data_on_device), mnist_.train,
                                                      device_, dp_ != nullptr);
  if (dp_ && c_.data_on_device != "off") d.choice.reason = "--mode dp: " + d.choice.reason;
  ENGINE_USAGE_CHECK(!d.choice.refused, "ENGINE_DATA_ON_DEVICE=on: ", d.choice.reason);
  device_data_ = std::move(d.data);
  if (rank_ == 0 && device_data_)
    std::printf("Data on device: on (%zu MiB; each batch gathered there from its indices)\n",
                d.nbytes >> 20);
  else if (rank_ == 0 && c_.data_on_device != "off" && device_.is_cuda())
    std::printf("Data on device: off (%s)\n", d.choice.reason.c_str());
}

// --profile's table; on the CPU with each layer's share of the FMA peak of this rank's threads,
// measured now that the timed steps are over.
void Trainer::print_profile() {
  double peak = 0;
  if (device_.is_cpu()) peak = kernels::cpu::measure_peak(threads_).fp32_gflops;
  std::printf("%s", report::profile_table(trace::to_json(), peak, threads_).c_str());
}

void Trainer::refuse_nonfinite(const nn::NamedTensors& ts, const std::string& what) const {
  if (c_.nonfinite == "off") return;
  const std::string bad = parallel::first_nonfinite(ts);
  ENGINE_CHECK(bad.empty(), what, ": tensor '", bad, "' holds inf or NaN (refused by --nonfinite ",
               c_.nonfinite, ")");
}

void Trainer::finish() {
  if (elastic_) elastic_->finish(rank_);
  // Every rank checks (the weights are equal everywhere), so that every rank stops alike.
  if (!c_.save.empty())
    refuse_nonfinite(model_->state_dict(), "--save " + c_.save + " after step " +
                                               std::to_string(pos_.step) + ": not written");
  if (rank_ == 0 && !c_.save.empty()) nn::save_state_dict(c_.save, *model_);
  if (c_.profile && rank_ == 0) print_profile();
  if (!c_.trace.empty()) parallel::write_rank_trace(c_.trace, comm_.get());
  trace::disable();
  if (comm_) comm_->barrier();  // nobody leaves while a peer may still need it
}

void run_training(const TrainConfig& c) {
  try {
    try {
      Trainer t(c);
      t.run();
    } catch (const parallel::NonfiniteStop& e) {
      ENGINE_FAIL(e.found(), "; stopped by --nonfinite stop, no checkpoint written from it ",
                  "(--nonfinite skip skips such steps)");
    } catch (const nn::ResumeMismatch& e) {  // --resume: a checkpoint of another setting
      ENGINE_FAIL(resume_refusal(e));
    }
  } catch (const std::exception& e) {
    comm::write_flight_dump(e.what());  // --flight-recorder: what every collective did
    throw;
  }
}

}  // namespace engine::apps
