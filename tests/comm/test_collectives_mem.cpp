// tests/comm/test_collectives_mem.cpp: every collective for W = 1..8 ranks as threads over the
// in-memory transport, with values unique to rank and position, counts 0, 1, W-1, W+1, 1013 (and
// 1<<20 for a few W), several segment sizes and every reduce op.
#include <gtest/gtest.h>

#include <cstring>

#include "comm/rendezvous/rendezvous.h"
#include "tests/comm/comm_test_util.h"

namespace engine::comm {
namespace {

using testing::expect_no_errors;
using testing::fval;
using testing::ival;
using testing::run_threads;

std::vector<size_t> counts_for(int W, bool big) {
  std::vector<size_t> c = {0, 1, static_cast<size_t>(W > 1 ? W - 1 : 2), static_cast<size_t>(W + 1),
                           1013};
  if (big) c.push_back(1 << 20);
  return c;
}

float expect_f(int W, size_t i, ReduceOp op) {
  float acc = fval(0, i);
  for (int r = 1; r < W; ++r) {
    float v = fval(r, i);
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg:
        acc += v;
        break;
      case ReduceOp::Max:
        acc = std::max(acc, v);
        break;
      case ReduceOp::Min:
        acc = std::min(acc, v);
        break;
      case ReduceOp::Prod:
        acc *= v;
        break;
    }
  }
  return op == ReduceOp::Avg ? acc / W : acc;
}

// PROD uses small values so that products stay exact.
float prod_val(int rank, size_t i) {
  return 1.0f + static_cast<float>((i + rank) % 2);
}

class MemCollectives : public ::testing::TestWithParam<int> {};

TEST_P(MemCollectives, AllReduceEveryOpCountAndSegment) {
  const int W = GetParam();
  auto comms = make_mem_communicators(W);
  const bool big = W == 2 || W == 3 || W == 8;
  const std::vector<size_t> segs = {8, 100, 4096, 128 << 10};
  expect_no_errors(run_threads(W, [&](int r) {
    Communicator& c = *comms[r];
    for (size_t seg : segs) {
      c.set_segment_bytes(seg);
      for (size_t n : counts_for(W, big && seg >= 4096)) {
        for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
          if (n > 2000 && op != ReduceOp::Sum && op != ReduceOp::Avg) continue;
          std::vector<float> b(n);
          for (size_t i = 0; i < n; ++i) b[i] = fval(r, i);
          c.all_reduce(b.data(), n, DType::F32, op);
          for (size_t i = 0; i < n; ++i)
            if (b[i] != expect_f(W, i, op)) {
              ADD_FAILURE() << "W=" << W << " rank " << r << " n=" << n << " seg=" << seg
                            << " op=" << reduce_op_name(op) << " [" << i << "] = " << b[i]
                            << " expected " << expect_f(W, i, op);
              return;
            }
        }
        // PROD, small values.
        std::vector<float> p(n);
        for (size_t i = 0; i < n; ++i) p[i] = prod_val(r, i);
        c.all_reduce(p.data(), n, DType::F32, ReduceOp::Prod);
        for (size_t i = 0; i < n; ++i) {
          float e = 1;
          for (int q = 0; q < W; ++q) e *= prod_val(q, i);
          if (p[i] != e) {
            ADD_FAILURE() << "PROD W=" << W << " n=" << n << " [" << i << "]";
            return;
          }
        }
        // int64 SUM and MAX.
        for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max}) {
          std::vector<int64_t> v(n);
          for (size_t i = 0; i < n; ++i) v[i] = ival(r, i);
          c.all_reduce(v.data(), n, DType::I64, op);
          for (size_t i = 0; i < n; ++i) {
            int64_t e = op == ReduceOp::Max ? ival(W - 1, i) : 0;
            if (op == ReduceOp::Sum)
              for (int q = 0; q < W; ++q) e += ival(q, i);
            if (v[i] != e) {
              ADD_FAILURE() << "I64 " << reduce_op_name(op) << " W=" << W << " n=" << n << " [" << i
                            << "] = " << v[i] << " expected " << e;
              return;
            }
          }
        }
      }
    }
  }));
}

TEST_P(MemCollectives, BroadcastReduceFromEveryRoot) {
  const int W = GetParam();
  auto comms = make_mem_communicators(W);
  expect_no_errors(run_threads(W, [&](int r) {
    Communicator& c = *comms[r];
    for (size_t seg : {size_t(8), size_t(4096), size_t(128 << 10)}) {
      c.set_segment_bytes(seg);
      for (size_t n : counts_for(W, false)) {
        for (int root = 0; root < W; ++root) {
          std::vector<float> b(n);
          for (size_t i = 0; i < n; ++i) b[i] = fval(r, i);
          c.broadcast(b.data(), n, DType::F32, root);
          for (size_t i = 0; i < n; ++i)
            if (b[i] != fval(root, i)) {
              ADD_FAILURE() << "broadcast W=" << W << " root " << root << " n=" << n << " [" << i
                            << "]";
              return;
            }
          for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Min}) {
            for (size_t i = 0; i < n; ++i) b[i] = fval(r, i);
            c.reduce(b.data(), n, DType::F32, op, root);
            for (size_t i = 0; i < n; ++i) {
              float e = r == root ? expect_f(W, i, op) : fval(r, i);  // others unchanged
              if (b[i] != e) {
                ADD_FAILURE() << "reduce " << reduce_op_name(op) << " W=" << W << " root " << root
                              << " rank " << r << " n=" << n << " [" << i << "] = " << b[i]
                              << " expected " << e;
                return;
              }
            }
          }
        }
      }
    }
  }));
}

TEST_P(MemCollectives, GatherScatterAllGatherReduceScatter) {
  const int W = GetParam();
  auto comms = make_mem_communicators(W);
  expect_no_errors(run_threads(W, [&](int r) {
    Communicator& c = *comms[r];
    for (size_t seg : {size_t(8), size_t(4096)}) {
      c.set_segment_bytes(seg);
      for (size_t n : counts_for(W, false)) {
        std::vector<float> in(n), out(n * W, -1.0f);
        for (size_t i = 0; i < n; ++i) in[i] = fval(r, i);
        c.all_gather(in.data(), out.data(), n, DType::F32);
        for (int q = 0; q < W; ++q)
          for (size_t i = 0; i < n; ++i)
            if (out[q * n + i] != fval(q, i)) {
              ADD_FAILURE() << "all_gather W=" << W << " n=" << n << " block " << q << " [" << i
                            << "]";
              return;
            }
        for (int root = 0; root < W; ++root) {
          std::vector<float> g(n * W, -1.0f);
          c.gather(in.data(), r == root ? g.data() : nullptr, n, DType::F32, root);
          if (r == root)
            for (int q = 0; q < W; ++q)
              for (size_t i = 0; i < n; ++i)
                if (g[q * n + i] != fval(q, i)) {
                  ADD_FAILURE() << "gather W=" << W << " root " << root << " n=" << n;
                  return;
                }
          // scatter: root's block q holds fval(root, q * n + i)
          std::vector<float> all(n * W), mine(n, -1.0f);
          for (size_t i = 0; i < n * W; ++i) all[i] = fval(r, i);
          c.scatter(r == root ? all.data() : nullptr, mine.data(), n, DType::F32, root);
          for (size_t i = 0; i < n; ++i)
            if (mine[i] != fval(root, r * n + i)) {
              ADD_FAILURE() << "scatter W=" << W << " root " << root << " n=" << n;
              return;
            }
        }
        // reduce_scatter: every rank contributes W blocks; rank r gets block r summed.
        for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
          std::vector<float> src(n * W), dst(n, -1.0f);
          for (size_t i = 0; i < n * W; ++i) src[i] = fval(r, i);
          std::vector<float> keep = src;
          c.reduce_scatter(src.data(), dst.data(), n, DType::F32, op);
          EXPECT_EQ(src, keep) << "reduce_scatter changed its input";
          for (size_t i = 0; i < n; ++i)
            if (dst[i] != expect_f(W, r * n + i, op)) {
              ADD_FAILURE() << "reduce_scatter " << reduce_op_name(op) << " W=" << W << " n=" << n
                            << " rank " << r << " [" << i << "] = " << dst[i] << " expected "
                            << expect_f(W, r * n + i, op);
              return;
            }
        }
      }
    }
    c.barrier();
  }));
}

TEST_P(MemCollectives, PointToPointRingAndAsync) {
  const int W = GetParam();
  auto comms = make_mem_communicators(W);
  expect_no_errors(run_threads(W, [&](int r) {
    Communicator& c = *comms[r];
    if (W == 1) return;
    const int right = (r + 1) % W, left = (r - 1 + W) % W;
    for (size_t n : {size_t(0), size_t(1), size_t(1013), size_t(300000)}) {
      std::vector<int64_t> out(n), in(n, -1);
      for (size_t i = 0; i < n; ++i) out[i] = ival(r, i);
      Work rw = c.irecv(in.data(), n, DType::I64, left, 7);
      Work sw = c.isend(out.data(), n, DType::I64, right, 7);
      rw.wait();
      sw.wait();
      for (size_t i = 0; i < n; ++i)
        if (in[i] != ival(left, i)) {
          ADD_FAILURE() << "p2p n=" << n << " [" << i << "]";
          return;
        }
    }
    // Async all_reduces queue in call order while p2p runs on its own stream.
    std::vector<std::vector<float>> bufs(4, std::vector<float>(5000));
    std::vector<Work> works;
    for (size_t k = 0; k < bufs.size(); ++k) {
      for (size_t i = 0; i < bufs[k].size(); ++i) bufs[k][i] = fval(r, i + k);
      works.push_back(c.all_reduce_async(bufs[k].data(), bufs[k].size(), DType::F32));
    }
    float token = static_cast<float>(r);
    if (r == 0) {
      c.send(&token, 1, DType::F32, 1);
    } else if (r == 1) {
      c.recv(&token, 1, DType::F32, 0);
      EXPECT_EQ(token, 0.0f);
    }
    std::vector<float> sync(10, 1.0f);
    c.all_reduce(sync.data(), sync.size(), DType::F32);  // runs after the queued ones
    for (auto& w : works) {
      EXPECT_TRUE(w.valid());
      w.wait();
      EXPECT_TRUE(w.completed());
    }
    for (size_t k = 0; k < bufs.size(); ++k)
      for (size_t i = 0; i < bufs[k].size(); ++i)
        if (bufs[k][i] != expect_f(W, i + k, ReduceOp::Sum)) {
          ADD_FAILURE() << "async all_reduce " << k << " [" << i << "]";
          return;
        }
    EXPECT_EQ(sync[0], static_cast<float>(W));
    // submit(): a bucket-style unit of work on the communication thread.
    std::vector<float> bucket(100, 2.0f);
    Work w = c.submit([&](Communicator& cc) {
      cc.all_reduce(bucket.data(), bucket.size(), DType::F32, ReduceOp::Avg);
    });
    w.wait();
    EXPECT_EQ(bucket[99], 2.0f);
  }));
}

INSTANTIATE_TEST_SUITE_P(World, MemCollectives, ::testing::Range(1, 9));

}  // namespace
}  // namespace engine::comm
