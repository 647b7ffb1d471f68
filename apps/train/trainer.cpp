// apps/train/trainer.cpp: the training loop of one rank.
//   loader (shard, prefetched) -> batch -> forward -> loss -> backward -> optimizer step
// then, per epoch, evaluation on the test split, the epoch line, metrics and a checkpoint.
#include "apps/train/trainer.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "apps/train/cuda_collectives.h"
#include "apps/train/plot.h"
#include "apps/train/profile.h"
#include "apps/train/report.h"
#include "comm/grad_sync.h"
#include "comm/rendezvous.h"
#include "core/autograd.h"
#include "core/device.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "core/trace.h"
#include "data/loader.h"
#include "data/mnist.h"
#include "data/partition.h"
#include "data/sampler.h"
#include "data/upload.h"
#include "nn/checkpoint.h"
#include "nn/data_parallel.h"
#include "nn/functional.h"
#include "nn/models.h"
#include "nn/optim.h"

namespace engine::apps {
namespace {

using Clock = std::chrono::steady_clock;

int default_threads() {
  if (const char* e = std::getenv("ENGINE_THREADS")) {
    int n = std::atoi(e);
    if (n > 0) return n;
  }
  return hardware_threads();
}

Tensor images_tensor(const data::Batch& b, Device dev) {
  return Tensor::from_vector(b.images, {b.size, 1, b.rows, b.cols}, dev);
}

// --device: rank r of a job trains on cuda:LOCAL_RANK; auto falls back to cpu with a notice.
Device pick_device(const TrainConfig& c, int local_rank, int rank) {
  if (c.device == "cpu") return Device::cpu();
  const int n = cuda_device_count();
  if (n == 0) {
    ENGINE_CHECK(c.device != "cuda", "--device cuda: ", cuda_unavailable_reason());
    if (rank == 0) std::printf("%s: training on cpu\n", cuda_unavailable_reason().c_str());
    return Device::cpu();
  }
  ENGINE_CHECK(local_rank < n, "rank ", rank, " is local rank ", local_rank, " but this host has ",
               n, " CUDA device(s)");
  return Device::cuda(local_rank);
}

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

std::unique_ptr<nn::Optimizer> make_optimizer(const TrainConfig& c, const nn::Module& m) {
  if (c.optimizer == "adam") {
    kernels::AdamConfig a;
    a.lr = c.lr;
    return std::make_unique<nn::Adam>(m.named_parameters(), a);
  }
  kernels::SgdConfig s;
  s.lr = c.lr;
  s.momentum = c.momentum;
  return std::make_unique<nn::SGD>(m.named_parameters(), s);
}

// Mean loss and accuracy on the test split. Each rank evaluates its 1/W slice without autograd;
// the sums meet in one all_reduce.
void evaluate(nn::Model& model, const data::MnistSplit& test, comm::Communicator* comm, Device dev,
              EpochResult* r) {
  NoGradGuard ng;
  model.eval();
  const int world = comm ? comm->size() : 1, rank = comm ? comm->rank() : 0;
  const int64_t begin = test.count * rank / world, end = test.count * (rank + 1) / world;
  constexpr int64_t kChunk = 1000;
  double loss_sum = 0;
  int64_t correct = 0;
  for (int64_t b = begin; b < end; b += kChunk) {
    data::Batch batch = data::contiguous_batch(test, b, std::min(end, b + kChunk));
    Tensor labels = Tensor::from_vector_i64(batch.labels, {batch.size}, dev);
    Tensor scores = model.forward(images_tensor(batch, dev));
    loss_sum += model.loss(scores, labels).item() * static_cast<double>(batch.size);
    correct += nn::correct_count(scores, labels);
  }
  model.train();
  if (comm) {
    float l = static_cast<float>(loss_sum);
    comm->all_reduce(&l, 1, DType::F32, comm::ReduceOp::SUM);
    comm->all_reduce(&correct, 1, DType::I64, comm::ReduceOp::SUM);
    loss_sum = l;
  }
  r->test_count = test.count;
  r->test_correct = correct;
  r->test_loss = test.count ? loss_sum / static_cast<double>(test.count) : 0;
  r->test_acc = test.count ? static_cast<double>(correct) / static_cast<double>(test.count) : 0;
}

// The communicator of this rank, or none when the job is one process.
std::unique_ptr<comm::Communicator> connect(const TrainConfig& c) {
  bool env_job = std::getenv("WORLD_SIZE") || std::getenv("OMPI_COMM_WORLD_SIZE") ||
                 std::getenv("SLURM_NTASKS");
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
  return comm::connect_communicator(t.store, t.rank, t.world_size, o.connect);
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

// This rank's sample indices for an epoch.
std::vector<int64_t> epoch_indices(const TrainConfig& c, int64_t n, int world, int rank,
                                   int64_t epoch, const std::vector<int64_t>& partition) {
  if (c.sharding == "partition") return partition;
  data::DistributedSampler sampler(n, world, rank, c.shuffle == "on", static_cast<uint64_t>(c.seed),
                                   c.drop_last);
  sampler.set_epoch(epoch);
  return sampler.indices();
}

}  // namespace

void run_training(const TrainConfig& c) {
  validate(c);
  std::unique_ptr<comm::Communicator> comm = connect(c);
  ENGINE_CHECK(c.mode == "ddp" || !comm,
               "--mode dp is one process driving several devices; this "
               "one is rank ",
               comm ? comm->rank() : 0, " of ", comm ? comm->size() : 1,
               ": start it alone, or use --mode ddp");
  const int rank = comm ? comm->rank() : 0, world = comm ? comm->size() : 1;
  int threads = c.threads > 0 ? static_cast<int>(c.threads) : default_threads();
  set_num_threads(threads);

  data::Mnist mnist = data::load_mnist(c.data_dir);
  ENGINE_CHECK(c.batch_size % world == 0, "--batch-size ", c.batch_size,
               " does not divide by the world size ", world);
  const int64_t batch = c.batch_size / world;
  const std::vector<int64_t> partition =
      c.sharding == "partition" ? data::partition_for_rank(mnist.train.count, world, rank, 1234)
                                : std::vector<int64_t>{};
  // Partition: one loader, its shard reshuffled per epoch (seeded by seed, epoch and rank).
  // Sampler: the sampler orders the epoch; the loader keeps that order.
  const bool loader_shuffles = c.sharding == "partition" && c.shuffle == "on";
  auto make_loader = [&](int64_t epoch) {
    return std::make_unique<data::BatchLoader>(
        mnist.train, epoch_indices(c, mnist.train.count, world, rank, epoch, partition), batch,
        loader_shuffles, /*drop_last=*/false, static_cast<uint64_t>(c.seed), rank);
  };

  nn::ModelOptions mo;
  if (c.dropout >= 0) mo.dropout = static_cast<float>(c.dropout);
  Generator init_gen(static_cast<uint64_t>(c.seed));
  Generator dropout_gen(static_cast<uint64_t>(c.seed) * 1000003u + 1u + rank);
  std::unique_ptr<nn::Model> model = nn::make_model(c.model, mo, init_gen, dropout_gen);
  const std::vector<Device> dp_devs = c.mode == "dp" ? dp_devices(c) : std::vector<Device>{};
  const Device dev =
      c.mode == "dp" ? dp_devs.front() : pick_device(c, comm ? comm->local_rank() : 0, rank);
  model->to(dev);
  if (!c.init_from.empty()) nn::load_state_dict(c.init_from, *model);
  std::unique_ptr<nn::Optimizer> opt = make_optimizer(c, *model);

  nn::TrainPosition pos;
  if (!c.resume.empty()) {
    pos = nn::load_training_checkpoint(c.resume, *model, *opt);
    // Each rank keeps its own dropout seed; all ranks draw the same number of values per step.
    dropout_gen.set_state(dropout_gen.seed(), pos.dropout_offset);
    if (rank == 0)
      std::printf("Resumed from %s at epoch %lld, batch %lld, step %lld\n", c.resume.c_str(),
                  static_cast<long long>(pos.epoch), static_cast<long long>(pos.batch_in_epoch),
                  static_cast<long long>(pos.step));
  }

  std::unique_ptr<nn::DataParallel> dp;
  if (c.mode == "dp") {
    dp = std::make_unique<nn::DataParallel>(*model, dp_devs, nn::model_factory(c.model, mo),
                                            static_cast<uint64_t>(c.seed) * 1000003u + 7u);
    for (size_t i = 1; i < dp_devs.size(); ++i) {
      auto it = pos.extra.find("dp_dropout_offset_" + std::to_string(i));
      if (it == pos.extra.end()) continue;
      Generator& g = dp->dropout_generator(i);
      g.set_state(g.seed(), std::stoull(it->second));
    }
    std::printf("DataParallel over %zu devices:", dp_devs.size());
    for (const Device& d : dp_devs) std::printf(" %s", d.str().c_str());
    std::printf(" (batch %lld cut along dim 0, outputs gathered on %s)\n",
                static_cast<long long>(c.batch_size), dp_devs.front().str().c_str());
  }

  std::unique_ptr<comm::GradSync> sync;
  const nn::NamedTensors buffers = model->named_buffers();
  if (comm) {
    const std::string cuda_path = attach_cuda_collectives(c, *comm, dev);
    // Every rank starts from rank 0's parameters and buffers.
    comm::broadcast_tensors(*comm, model->state_dict(), 0);
    sync = std::make_unique<comm::GradSync>(*comm, model->named_parameters(),
                                            comm::sync_mode_from_name(c.sync),
                                            static_cast<size_t>(c.bucket_mb * (1 << 20)));
    if (rank == 0) {
      std::printf(
          "World %d: ring over %s, sync %s, sharding %s, %lld images per rank per step, "
          "%d threads per rank\n",
          world, comm->transport_kind().c_str(), c.sync.c_str(), c.sharding.c_str(),
          static_cast<long long>(batch), threads);
      if (!cuda_path.empty())
        std::printf("CUDA tensors: %s, rank r on cuda:LOCAL_RANK\n", cuda_path.c_str());
    }
  }

  std::unique_ptr<MetricsWriter> metrics;
  if (rank == 0 && !c.metrics.empty())
    metrics = std::make_unique<MetricsWriter>(c.metrics, !c.resume.empty());
  auto save_checkpoint = [&](int64_t epoch, int64_t batch_in_epoch) {
    if (rank != 0 || c.checkpoint.empty()) return;
    pos.epoch = epoch;
    pos.batch_in_epoch = batch_in_epoch;
    pos.init_seed = static_cast<uint64_t>(c.seed);
    pos.dropout_seed = dropout_gen.seed();
    pos.dropout_offset = dropout_gen.offset();
    pos.extra["model"] = c.model;
    if (dp)  // the other replicas' dropout streams, for a bit-exact resume of --mode dp
      for (size_t i = 1; i < dp->devices().size(); ++i)
        pos.extra["dp_dropout_offset_" + std::to_string(i)] =
            std::to_string(dp->dropout_generator(i).offset());
    nn::save_training_checkpoint(c.checkpoint, *model, *opt, pos);
  };

  if (!c.trace.empty() || c.profile) trace::enable(rank);
  std::vector<double> step_loss;                      // --plot: rank 0's loss per step
  std::vector<std::pair<int64_t, double>> epoch_acc;  // --plot: (step, test accuracy)

  Progress progress(rank, rank == 0);
  const auto run_start = Clock::now();
  bool stop = c.steps > 0 && pos.step >= c.steps;
  for (int64_t epoch = pos.epoch; epoch < c.epochs && !stop; ++epoch) {
    std::unique_ptr<data::BatchLoader> loader = make_loader(epoch);
    data::BatchUploader uploader(dp ? Device::cpu() : dev, batch, mnist.train.rows,
                                 mnist.train.cols);
    loader->start_epoch(epoch);
    const int64_t first = epoch == pos.epoch ? pos.batch_in_epoch : 0;
    data::Batch b;
    for (int64_t i = 0; i < first && loader->next(&b); ++i) {
    }  // batches a resumed run has already trained on
    progress.start_epoch(epoch, loader->batches_per_epoch(), first);
    double loss_sum = 0;
    int64_t batches = 0, images = 0, bi = first;
    const auto epoch_start = Clock::now();
    // The next batch is staged (on a GPU: uploading on the copy stream) before this one computes.
    auto stage_next = [&]() -> int {
      trace::Scope ts("data", "data");
      return loader->next(&b) ? uploader.stage(b) : -1;
    };
    int staged = stage_next();
    for (; staged >= 0; ++bi) {
      data::DeviceBatch cur = uploader.take(staged);
      staged = stage_next();
      trace::Scope step_scope("step", "step");
      opt->zero_grad();
      // As DDP (broadcast_buffers=True): rank 0's BatchNorm statistics go to every rank.
      if (comm && !buffers.empty()) {
        trace::Scope ts("broadcast buffers", "comm");
        comm::broadcast_tensors(*comm, buffers, 0);
      }
      Tensor loss;
      {
        trace::Scope ts("forward", "forward");
        Tensor scores = dp ? dp->forward(cur.images) : (*model)(cur.images);
        loss = model->loss(scores, cur.labels.to(scores.device()));
      }
      if (sync) sync->begin();
      {
        trace::Scope ts("backward", "backward");
        loss.backward();
      }
      if (sync) sync->finish();
      if (dp) dp->reduce_gradients();
      {
        trace::Scope ts("optimizer", "optimizer");
        opt->step();
      }
      uploader.done(cur.slot);
      ++pos.step;
      double l = loss.item();
      if (!c.plot.empty()) step_loss.push_back(l);
      loss_sum += l;
      ++batches;
      images += cur.size * world;
      progress.update(bi, l, cur.size * world);
      if (c.steps > 0 && pos.step >= c.steps) {
        stop = true;
        ++bi;
        break;
      }
    }
    const double train_s = std::chrono::duration<double>(Clock::now() - epoch_start).count();
    progress.finish();
    const bool epoch_done = bi >= loader->batches_per_epoch();
    EpochResult r;
    r.epoch = epoch;
    r.step = pos.step;
    if (comm) {  // the epoch line shows the mean loss over all ranks
      float sums[2] = {static_cast<float>(loss_sum), static_cast<float>(batches)};
      comm->all_reduce(sums, 2, DType::F32, comm::ReduceOp::SUM);
      loss_sum = sums[0];
      batches = static_cast<int64_t>(sums[1]);
    }
    r.train_loss = batches ? loss_sum / static_cast<double>(batches) : 0;
    r.images_per_s = train_s > 0 ? static_cast<double>(images) / train_s : 0;
    {
      trace::Scope ts("evaluate", "eval");
      evaluate(*model, mnist.test, comm.get(), dev, &r);
    }
    epoch_acc.emplace_back(r.step, r.test_acc);
    r.wall_s = std::chrono::duration<double>(Clock::now() - run_start).count();
    if (rank == 0) print_epoch(rank, r);
    if (metrics) metrics->write(r);
    save_checkpoint(epoch_done ? epoch + 1 : epoch, epoch_done ? 0 : bi);
    if (rank == 0 && !c.plot.empty())
      write_training_plot(c.plot, step_loss, epoch_acc,
                          c.model + ", world " + std::to_string(world));
  }
  if (rank == 0 && !c.save.empty()) nn::save_state_dict(c.save, *model);
  if (c.profile && rank == 0) std::printf("%s", profile_table(trace::to_json()).c_str());
  if (!c.trace.empty()) write_trace(c.trace, comm.get());
  trace::disable();
  if (comm) comm->barrier();  // nobody leaves while a peer may still need it
}

}  // namespace engine::apps
