// parallel/elastic.h in-process: a state streamed with its digest, the step boundary's buffers,
// and three ranks as threads over TCP and shared memory that lose one and regroup into two.
#include <gtest/gtest.h>

#include <thread>

#include "comm/rendezvous/mem_store.h"
#include "comm/rendezvous/rendezvous.h"
#include "nn/models.h"
#include "parallel/elastic.h"
#include "parallel/reducers.h"

namespace engine::parallel {
namespace {

TEST(ShareState, EveryRankEndsWithTheRootsBytes) {
  auto comms = comm::make_mem_communicators(3);
  std::string big(100000, 'x');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  std::vector<std::string> got(3);
  std::vector<std::thread> ts;
  for (int r = 0; r < 3; ++r)
    ts.emplace_back([&, r] { got[r] = share_state(*comms[r], 1, r == 1 ? big : "stale"); });
  for (auto& t : ts) t.join();
  for (const std::string& g : got) EXPECT_EQ(g, big);
  EXPECT_NE(state_digest(big), state_digest(big.substr(1)));
}

TEST(StepBoundary, PutsTheBuffersKeptBack) {
  Tensor mean = Tensor::full({4}, 1.0f);
  nn::NamedTensors buffers = {{"bn.running_mean", mean}};
  StepBoundary b;
  nn::TrainPosition pos;
  pos.step = 7;
  pos.epoch = 2;
  b.keep(buffers, pos);
  mean.fill_(5.0f);  // a forward that did not complete its step
  b.restore(buffers);
  EXPECT_EQ(mean.to_vector(), std::vector<float>(4, 1.0f));
  EXPECT_EQ(b.position().step, 7);
  EXPECT_EQ(b.progress(), (int64_t{7} << 20) + 2);
}

// Ranks 0 and 1 all_reduce after rank 2's communicator went (as its process would): both see the
// loss, regroup into generation 1 of two ranks, and end with the weights of rank 1, which had
// passed one step boundary more; then they all_reduce over the new communicator.
void lose_one_and_regroup(comm::TransportKind kind) {
  auto store = std::make_shared<comm::MemStore>();
  comm::ConnectOptions o;
  o.timeout = comm::Millis(10000);
  o.transport = kind;
  std::vector<Elastic::Handover> after(3);
  std::vector<std::vector<float>> weights(3);
  std::vector<std::string> errors(3);
  std::vector<std::thread> ts;
  for (int r = 0; r < 3; ++r)
    ts.emplace_back([&, r] {
      try {
        Generator init(1), drop(2);
        auto model = nn::make_model("linear", {}, init, drop);
        auto opt = make_optimizer({}, model->named_parameters());
        auto fresh = make_optimizer({}, model->named_parameters());
        model->named_parameters()[0].second.fill_(static_cast<float>(r));
        StepBoundary b;
        nn::TrainPosition pos;
        pos.step = 10 + r;
        b.keep(model->named_buffers(), pos);
        auto c = comm::connect_communicator(store, r, 3, o);
        Elastic e(store, r, 3, o);
        e.started();
        float x = 1;
        c->all_reduce(&x, 1, DType::F32);
        if (r == 2) return;  // its communicator goes with it
        try {
          for (int i = 0; i < 1000; ++i) c->all_reduce(&x, 1, DType::F32);
          errors[r] = "no loss seen";
          return;
        } catch (const Error&) {
          ASSERT_TRUE(Elastic::lost_a_member(c.get()));
        }
        after[r] = e.hand_over(*c, b, *model, *opt, *fresh);
        weights[r] = model->named_parameters()[0].second.to_vector();
        float y = static_cast<float>(r + 1);
        after[r].group.comm->all_reduce(&y, 1, DType::F32);
        EXPECT_EQ(y, 3.0f);
      } catch (const std::exception& ex) {
        errors[r] = ex.what();
      }
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(errors[r], "") << r;
    const Regrouped& g = after[r].group;
    EXPECT_EQ(g.membership.generation, 1);
    EXPECT_EQ(g.membership.ids, (std::vector<int>{0, 1}));
    EXPECT_EQ(after[r].source, 1);  // it passed one boundary more
    EXPECT_EQ(after[r].pos.step, 11);
    EXPECT_EQ(weights[r], std::vector<float>(weights[r].size(), 1.0f));
    EXPECT_EQ(g.lost, std::vector<int>{2});
    ASSERT_EQ(g.reasons.size(), 1u);
    EXPECT_EQ(g.comm->size(), 2);
  }
}

TEST(Elastic, ThreeThreadsOverTcpLoseOneAndGoOnAsTwo) {
  lose_one_and_regroup(comm::TransportKind::Tcp);
}

TEST(Elastic, ThreeThreadsOverSharedMemoryLoseOneAndGoOnAsTwo) {
  lose_one_and_regroup(comm::TransportKind::Shm);
}

}  // namespace
}  // namespace engine::parallel
