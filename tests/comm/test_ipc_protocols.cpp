// tests/comm/test_ipc_protocols.cpp: the stream-ordered IPC ring's protocols
// (comm/backends/cuda_ipc/protocol/) on the CPU, threads as ranks (and Simple's channels as more
// threads), over the CPU memory-operations policy: LL packing, the call words, slot arithmetic,
// the protocol choice, every op over W = 2, 3, 4 and many counts (both protocols in one world, so
// that their shared sequence numbers and FIFO positions carry across calls), and the failures: a
// mismatched call, a silent rank, a rank that dies mid-call. Each names the rank at fault.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/backends/cuda_ipc/protocol/call_state.h"
#include "comm/backends/cuda_ipc/protocol/cpu_mem_ops.h"
#include "comm/backends/cuda_ipc/protocol/describe.h"
#include "comm/backends/cuda_ipc/protocol/ll.h"
#include "comm/backends/cuda_ipc/protocol/simple.h"
#include "comm/base/reduce.h"
#include "io/dtype.h"

namespace engine::comm {
namespace {

using namespace ipc::proto;
using Ms = std::chrono::milliseconds;

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min,
                             ReduceOp::Prod};

// Exact in float32 in any order: small integers, powers of two for products.
float value(ReduceOp op, int rank, int64_t i, int call) {
  if (op == ReduceOp::Prod)
    return std::ldexp(1.0f, static_cast<int>((i + 3 * rank + call) % 7) - 3);
  return static_cast<float>((rank * 7 + i * 3 + call * 5) % 41 - 20);
}

float expected(ReduceOp op, int world, int64_t i, int call) {
  float e = value(op, 0, i, call);
  for (int q = 1; q < world; ++q) {
    const float v = value(op, q, i, call);
    e = op == ReduceOp::Prod  ? e * v
        : op == ReduceOp::Max ? std::max(e, v)
        : op == ReduceOp::Min ? std::min(e, v)
                              : e + v;
  }
  return op == ReduceOp::Avg ? e / static_cast<float>(world) : e;
}

template <class F>
bool with_op(ReduceOp op, F f) {
  switch (op) {
    case ReduceOp::Prod:
      return f(kernels::ProdOp{});
    case ReduceOp::Max:
      return f(kernels::MaxOp{});
    case ReduceOp::Min:
      return f(kernels::MinOp{});
    default:
      return f(kernels::SumOp{});
  }
}

// A rank that stops (as if its process died) after `budget` slots (Simple) or LL lines.
struct Died {};
struct DyingOps : CpuMemOps {
  std::atomic<int>* budget;
  void barrier() const {
    if (budget->fetch_sub(1) <= 0) throw Died{};
  }
  void store_line(uint64_t* p, uint64_t v) const {
    if (budget->fetch_sub(1) <= 0) throw Died{};
    CpuMemOps::store_line(p, v);
  }
};

// W ranks' regions in host memory, their call states and error records.
class World {
 public:
  World(int world, Geometry g, Ms timeout) : timeout_(timeout) {
    g.world = world;
    g_ = g;
    layout_ = region_layout(g);
    for (int r = 0; r < world; ++r) {
      mem_.push_back(std::make_unique<uint64_t[]>(layout_.bytes / 8));  // zeroed
      err_.push_back(std::make_unique<ErrorRecord>());
    }
    st_.resize(world);
  }
  int size() const { return g_.world; }

  // One call of rank r; "" when it succeeded, else its one-line error.
  template <class Ops = CpuMemOps>
  std::string call(int r, Protocol p, float* data, int64_t count, ReduceOp op, Ops ops = {}) {
    auto a = std::make_unique<CallArgs>();
    a->rank = r;
    a->g = g_;
    a->layout = layout_;
    a->timeout_ns = static_cast<uint64_t>(timeout_.count()) * 1000000ull;
    a->err = err_[r].get();
    for (int q = 0; q < g_.world; ++q) a->regions[q] = reinterpret_cast<char*>(mem_[q].get());
    const Protocol run = choose_protocol(p, count * 4, g_);
    next_call(st_[r], *a, run, data, count, static_cast<uint32_t>(op),
              static_cast<uint32_t>(DType::F32), op == ReduceOp::Avg);
    const bool ok = run == Protocol::Ll ? run_ll(*a, op, ops) : run_simple(*a, op, ops);
    if (ok && a->err->state == kClear) return "";
    CallLabel label{r,
                    g_.world,
                    -1,
                    static_cast<uint64_t>(count),
                    reduce_op_name(op),
                    run == Protocol::Ll ? "ll" : "simple",
                    timeout_};
    return describe_error(*a->err, label);
  }

 private:
  template <class Ops>
  static bool run_ll(const CallArgs& a, ReduceOp op, const Ops& ops) {
    return with_op(op, [&](auto f) { return ll_all_reduce(ops, a, f, true); });
  }
  template <class Ops>
  bool run_simple(const CallArgs& a, ReduceOp op, const Ops& ops) {
    std::vector<std::thread> ts;
    std::atomic<bool> ok{true};
    for (int c = 0; c < g_.channels; ++c)
      ts.emplace_back([&, c] {
        try {
          if (!with_op(op, [&](auto f) { return simple_channel(ops, a, f, c); })) ok = false;
        } catch (const Died&) {
          ok = false;
        }
      });
    for (auto& t : ts) t.join();
    return ok;
  }

  Geometry g_;
  Layout layout_{};
  Ms timeout_;
  std::vector<std::unique_ptr<uint64_t[]>> mem_;
  std::vector<std::unique_ptr<ErrorRecord>> err_;
  std::vector<CallState> st_;
};

// Small slots and few of them: every call wraps the FIFOs; LL in rounds of 64.
Geometry small_geometry(int channels) {
  Geometry g;
  g.channels = channels;
  g.slots = 3;
  g.slot_elems = 16;
  g.ll_lines = 64;
  g.ll_max_bytes = 400;
  return g;
}

// Runs body(rank) on W threads, returns each rank's error ("" for success).
template <class F>
std::vector<std::string> on_ranks(int W, F body) {
  std::vector<std::string> errs(W);
  std::vector<std::thread> ts;
  for (int r = 0; r < W; ++r)
    ts.emplace_back([&, r] {
      try {
        errs[r] = body(r);
      } catch (const Died&) {
        errs[r] = "died";
      }
    });
  for (auto& t : ts) t.join();
  return errs;
}

// ---- Pure pieces --------------------------------------------------------------------------------

TEST(IpcProtocolPieces, LlLinePacksDataAndFlagInOneWord) {
  for (float f : {0.f, -0.f, 1.5f, -3.25e-30f, INFINITY, NAN}) {
    for (uint32_t flag : {1u, 2u, 0x7FFFFFFFu, 0xFFFFFFFFu}) {
      const uint64_t line = ll_pack(float_bits(f), flag);
      EXPECT_EQ(ll_flag(line), flag);
      EXPECT_EQ(float_bits(bits_float(ll_data(line))), float_bits(f));
    }
  }
  EXPECT_NE(ll_flag(ll_pack(float_bits(1.f), 1)), 0u);  // the buffers' zeros never look posted
}

TEST(IpcProtocolPieces, CallWordsTellCallsApart) {
  const CallWords w = call_words(7, 1000, 2, 0);
  EXPECT_EQ(word_seq(w.w0), 7u);
  EXPECT_EQ(word_op(w.w0), 2u);
  EXPECT_EQ(word_dtype(w.w0), 0u);
  EXPECT_EQ(w.w1, 1000u);
  EXPECT_NE(call_words(8, 1000, 2, 0).w0, w.w0);
  EXPECT_NE(call_words(7, 1001, 2, 0).w0, w.w0);
  EXPECT_NE(call_words(7, 1000, 3, 0).w0, w.w0);
  EXPECT_NE(call_words(7, 1000, 2, 4).w0, w.w0);
  EXPECT_TRUE(seq_at_least(1, 0xFFFFFFFFu));  // wraps
  EXPECT_FALSE(seq_at_least(0xFFFFFFFFu, 1));
}

TEST(IpcProtocolPieces, ChannelPartsCoverTheBufferAligned) {
  for (int64_t count : {1, 3, 4, 5, 63, 64, 65, 1000, 4097}) {
    for (int C : {1, 2, 3, 8}) {
      size_t at = 0;
      for (int c = 0; c < C; ++c) {
        const Range r = channel_part(count, C, c);
        EXPECT_EQ(r.begin, at) << count << " " << C << " " << c;
        EXPECT_TRUE(r.begin % kAlignElems == 0 || r.begin == static_cast<size_t>(count));
        at = r.end;
      }
      EXPECT_EQ(at, static_cast<size_t>(count));
    }
  }
}

// What a rank sends on a channel, its next takes: the FIFO counters agree with no exchange.
TEST(IpcProtocolPieces, SlotCountsOfNeighboursAgree) {
  for (int W : {2, 3, 4, 7}) {
    for (int64_t count : {1, 5, 16, 17, 100, 333, 4097}) {
      Geometry g = small_geometry(3);
      g.world = W;
      for (int c = 0; c < g.channels; ++c) {
        for (int r = 0; r < W; ++r) {
          const SlotCounts mine = channel_slots(count, r, g, c);
          const SlotCounts next = channel_slots(count, (r + 1) % W, g, c);
          EXPECT_EQ(mine.sent, next.taken) << "W " << W << " count " << count << " rank " << r;
        }
      }
    }
  }
  EXPECT_EQ(slots_for(0, 16), 0);
  EXPECT_EQ(slots_for(16, 16), 1);
  EXPECT_EQ(slots_for(17, 16), 2);  // a partial last slot
  EXPECT_EQ(ll_rounds(0, 64), 1);
  EXPECT_EQ(ll_rounds(129, 64), 3);
}

TEST(IpcProtocolPieces, AutoChoosesLlForSmallCallsAndFewRanks) {
  Geometry g;
  g.ll_max_bytes = 65536;
  g.world = 2;
  EXPECT_EQ(choose_protocol(Protocol::Auto, 8, g), Protocol::Ll);
  EXPECT_EQ(choose_protocol(Protocol::Auto, 65536, g), Protocol::Ll);
  EXPECT_EQ(choose_protocol(Protocol::Auto, 65540, g), Protocol::Simple);
  EXPECT_EQ(choose_protocol(Protocol::Simple, 8, g), Protocol::Simple);
  EXPECT_EQ(choose_protocol(Protocol::Ll, 1 << 30, g), Protocol::Ll);
  g.world = 9;  // LL is one hop to every peer: W <= 8
  EXPECT_EQ(choose_protocol(Protocol::Auto, 8, g), Protocol::Simple);
  const Layout l = region_layout(g);
  EXPECT_EQ(l.bytes % 256, 0u);
  EXPECT_LT(l.fifo, l.bytes);
}

// Auto where ranks share a GPU without MPS runs the event chain at every size; concurrent: LL up
// to ll_max_bytes (the measured crossover), Simple above. Explicit choices are kept.
TEST(IpcProtocolPieces, AutoRunsEventsWhenTimeSliced) {
  Geometry g;
  g.world = 2;
  g.ll_max_bytes = 65536;
  EXPECT_EQ(ring_protocol(Protocol::Auto, true), Protocol::Events);
  EXPECT_EQ(ring_protocol(Protocol::Auto, false), Protocol::Auto);
  for (Protocol p : {Protocol::Ll, Protocol::Simple, Protocol::Events})
    for (bool sliced : {false, true}) EXPECT_EQ(ring_protocol(p, sliced), p);
  for (int64_t bytes : {int64_t(8), int64_t(65536), int64_t(65540), int64_t(256) << 20})
    EXPECT_EQ(protocol_ran(Protocol::Auto, true, bytes, g), Protocol::Events) << bytes;
  EXPECT_EQ(protocol_ran(Protocol::Auto, false, 8, g), Protocol::Ll);
  EXPECT_EQ(protocol_ran(Protocol::Auto, false, 65536, g), Protocol::Ll);
  EXPECT_EQ(protocol_ran(Protocol::Auto, false, 131072, g), Protocol::Simple);
  EXPECT_EQ(protocol_ran(Protocol::Simple, true, 8, g), Protocol::Simple);
  EXPECT_EQ(protocol_ran(Protocol::Events, false, 8, g), Protocol::Events);
}

// A team of n lanes run one lane after another: move_slot's lanes touch disjoint elements.
struct LaneOps : CpuMemOps {
  int l = 0, n = 1;
  int lane() const { return l; }
  int lanes() const { return n; }
};

// A pointer at `skew` floats past a 16-byte boundary inside v.
float* skewed(std::vector<float>& v, int skew) {
  const auto at = reinterpret_cast<uintptr_t>(v.data());
  return v.data() + (16 - at % 16) % 16 / 4 + skew;
}

// move_slot over every lane count, length and alignment: 16-byte accesses kUnroll deep where
// aligned, floats for the tail and for a misaligned buffer; nothing past n is touched.
TEST(IpcProtocolPieces, SlotMovesVectorsTailsAndMisalignedBuffers) {
  const float kUntouched = -777.f;
  for (int lanes : {1, 3, 32})
    for (int64_t n : {0, 1, 3, 4, 5, 16, 17, 63, 64, 65, 200, 1001})
      for (int skew : {0, 1, 2}) {
        std::vector<float> in_v(n + 8), local_v(n + 8), out_v(n + 8, kUntouched);
        const float* in = skewed(in_v, 0);
        float* local = skewed(local_v, skew);
        float* out = skewed(out_v, 0);
        for (int64_t i = 0; i < n; ++i) {
          in_v[in - in_v.data() + i] = static_cast<float>(i % 13);
          local[i] = static_cast<float>(2 * (i % 7));
        }
        for (int l = 0; l < lanes; ++l) {
          LaneOps ops;
          ops.l = l;
          ops.n = lanes;
          move_slot<UnitKind::Final>(ops, kernels::SumOp{}, true, 2.f, in, local, out, n);
        }
        for (int64_t i = 0; i < n; ++i) {
          const float want = (static_cast<float>(i % 13) + static_cast<float>(2 * (i % 7))) / 2;
          ASSERT_EQ(out[i], want) << "lanes " << lanes << " n " << n << " skew " << skew << " "
                                  << i;
          ASSERT_EQ(local[i], want) << "lanes " << lanes << " n " << n << " skew " << skew;
        }
        EXPECT_EQ(out[n], kUntouched) << "lanes " << lanes << " n " << n << " skew " << skew;
      }
}

// ---- All reduce, threads as ranks ---------------------------------------------------------------

// Every rank calls `calls` all_reduces of varying counts and ops; all must equal the CPU's.
void check_world(int W, Protocol p, int channels) {
  World world(W, small_geometry(channels), Ms(20000));
  // One element, a partial float4, exactly a slot, several partial slots and LL rounds.
  const int64_t counts[] = {1, 5, 64, 333};
  int call = 0;
  for (int64_t count : counts) {
    for (ReduceOp op : kOps) {
      std::vector<std::vector<float>> data(W, std::vector<float>(static_cast<size_t>(count)));
      for (int r = 0; r < W; ++r)
        for (int64_t i = 0; i < count; ++i) data[r][i] = value(op, r, i, call);
      const auto errs =
          on_ranks(W, [&](int r) { return world.call(r, p, data[r].data(), count, op); });
      for (int r = 0; r < W; ++r) {
        ASSERT_EQ(errs[r], "") << "W " << W << " count " << count << " " << reduce_op_name(op);
        for (int64_t i = 0; i < count; ++i)
          ASSERT_EQ(data[r][i], expected(op, W, i, call))
              << "W " << W << " rank " << r << " count " << count << " " << reduce_op_name(op)
              << " element " << i;
      }
      ++call;
    }
  }
}

TEST(IpcProtocolRanks, LlMatchesTheCpu) {
  for (int W : {2, 3, 4}) check_world(W, Protocol::Ll, 1);
}

TEST(IpcProtocolRanks, SimpleMatchesTheCpu) {
  for (int W : {2, 3, 4}) check_world(W, Protocol::Simple, W == 3 ? 3 : 2);
}

// A user buffer that is not 16-byte aligned: Simple moves it one float at a time, right.
TEST(IpcProtocolRanks, SimpleMatchesTheCpuOnAMisalignedBuffer) {
  const int W = 2;
  World world(W, small_geometry(2), Ms(20000));
  const int64_t count = 333;
  std::vector<std::vector<float>> store(W, std::vector<float>(count + 8));
  std::vector<float*> data(W);
  for (int r = 0; r < W; ++r) {
    data[r] = skewed(store[r], 1);
    for (int64_t i = 0; i < count; ++i) data[r][i] = value(ReduceOp::Sum, r, i, 0);
  }
  const auto errs = on_ranks(
      W, [&](int r) { return world.call(r, Protocol::Simple, data[r], count, ReduceOp::Sum); });
  for (int r = 0; r < W; ++r) {
    ASSERT_EQ(errs[r], "");
    for (int64_t i = 0; i < count; ++i)
      ASSERT_EQ(data[r][i], expected(ReduceOp::Sum, W, i, 0)) << "rank " << r << " element " << i;
  }
}

// Auto runs LL up to 400 bytes and Simple above, in one world: both share sequence numbers.
TEST(IpcProtocolRanks, AutoMixesBothProtocols) {
  check_world(3, Protocol::Auto, 2);
}

// ---- Failures -----------------------------------------------------------------------------------

struct Timed {
  std::vector<std::string> errs;
  Ms took;
};

template <class F>
Timed timed(int W, F body) {
  const auto t0 = std::chrono::steady_clock::now();
  Timed t{on_ranks(W, body), Ms(0)};
  t.took = std::chrono::duration_cast<Ms>(std::chrono::steady_clock::now() - t0);
  return t;
}

// One rank calls with another count (or op): every rank fails at once, naming a peer.
TEST(IpcProtocolFailures, MismatchNamesThePeer) {
  for (Protocol p : {Protocol::Ll, Protocol::Simple}) {
    for (int W : {2, 3}) {
      World world(W, small_geometry(2), Ms(20000));
      std::vector<std::vector<float>> data(W, std::vector<float>(200, 1.f));
      const int odd = W - 1;
      const Timed t = timed(W, [&](int r) {
        const ReduceOp op = W == 3 && r == odd ? ReduceOp::Max : ReduceOp::Sum;
        return world.call(r, p, data[r].data(), r == odd && W == 2 ? 150 : 100, op);
      });
      EXPECT_LT(t.took, Ms(10000));  // not the timeout: the words differ at once
      for (int r = 0; r < W; ++r) {
        SCOPED_TRACE(t.errs[r]);
        EXPECT_TRUE(has(t.errs[r], "rank " + std::to_string(r) + " of " + std::to_string(W)));
        EXPECT_EQ(t.errs[r].find('\n'), std::string::npos);
        if (r != odd) {
          EXPECT_TRUE(has(t.errs[r], "rank " + std::to_string(odd)));
        }
        EXPECT_TRUE(has(t.errs[r], "called all_reduce") || has(t.errs[r], "blames"));
      }
    }
  }
}

// One rank never calls: the others fail within the timeout, naming it.
TEST(IpcProtocolFailures, SilentRankIsNamed) {
  for (Protocol p : {Protocol::Ll, Protocol::Simple}) {
    const int W = 3, silent = 1;
    World world(W, small_geometry(2), Ms(300));
    std::vector<std::vector<float>> data(W, std::vector<float>(100, 1.f));
    const Timed t = timed(W, [&](int r) {
      return r == silent ? std::string() : world.call(r, p, data[r].data(), 100, ReduceOp::Sum);
    });
    EXPECT_LT(t.took, Ms(3000));
    for (int r = 0; r < W; ++r) {
      if (r == silent) continue;
      SCOPED_TRACE(t.errs[r]);
      EXPECT_TRUE(has(t.errs[r], "rank 1"));
      EXPECT_TRUE(has(t.errs[r], "timeout 0.3") || has(t.errs[r], "timeout 300"));
    }
  }
}

// A rank stops after k slots (Simple) or lines (LL) of a call: the others fail within the
// timeout, and every one names it (directly, through the chain of waits, or through the fault
// broadcast of the rank that saw it first).
TEST(IpcProtocolFailures, RankDyingMidCallIsNamed) {
  for (Protocol p : {Protocol::Ll, Protocol::Simple}) {
    for (int W : {2, 3, 4}) {
      const int dying = 1;
      World world(W, small_geometry(2), Ms(300));
      std::vector<std::vector<float>> data(W, std::vector<float>(300, 1.f));
      std::atomic<int> budget{p == Protocol::Ll ? 40 : 5};
      const Timed t = timed(W, [&](int r) {
        if (r != dying) return world.call(r, p, data[r].data(), 300, ReduceOp::Sum);
        return world.call(r, p, data[r].data(), 300, ReduceOp::Sum, DyingOps{{}, &budget});
      });
      EXPECT_LT(t.took, Ms(3000));
      for (int r = 0; r < W; ++r) {
        if (r == dying) continue;
        SCOPED_TRACE(t.errs[r]);
        EXPECT_TRUE(has(t.errs[r], "rank 1")) << "W " << W;
        EXPECT_TRUE(has(t.errs[r], "rank " + std::to_string(r) + " of "));
      }
    }
  }
}

}  // namespace
}  // namespace engine::comm
