// apps/ring_demo/chunk_tree_demo.cpp: see chunk_tree_demo.h.
#include "apps/ring_demo/chunk_tree_demo.h"

#include <cstdio>
#include <cstring>
#include <exception>
#include <thread>
#include <utility>

#include "comm/algorithms/tuning.h"
#include "comm/rendezvous/mem_store.h"
#include "comm/rendezvous/membership.h"
#include "comm/rendezvous/rendezvous.h"
#include "core/chunk_tree.h"
#include "core/error.h"

namespace engine::ring_demo {
namespace {

namespace ct = chunk_tree;
using Buf = std::vector<float>;

struct AddInto {
  void operator()(Buf& a, const Buf& b) const {
    for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  }
};

template <class... A>
std::string fmt(const char* f, A... a) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a...);
  return buf;
}

std::string chunk_name(size_t j) {
  std::string s(1, 'c');  // appended piecewise (GCC 12's -Wrestrict misfires on "c" + s)
  s += std::to_string(j);
  return s;
}

// The node's sum as an expression over its leaves, in the tree's order.
std::string expression(ct::Node node, size_t n) {
  const ct::Range lv = ct::leaves(node, n);
  if (node.level == 0) return chunk_name(lv.begin);
  const ct::Node left{node.level - 1, node.index * 2}, right{node.level - 1, node.index * 2 + 1};
  if (ct::leaves(right, n).empty()) return expression(left, n);
  std::string s;  // appended piecewise (GCC 12's -Wrestrict misfires on "(" + e)
  for (const ct::Node c : {left, right}) {
    if (!s.empty()) s += " + ";
    const bool group = ct::leaves(c, n).size() > 1;
    if (group) s += '(';
    s += expression(c, n);
    if (group) s += ')';
  }
  return s;
}

Buf chunk_values(const TreeConfig& c, size_t j) {
  Buf v(c.count);
  for (size_t i = 0; i < c.count; ++i)
    v[i] = c.values.empty() ? 1.0f / (static_cast<float>(j + 1) + 0.5f * static_cast<float>(i))
                            : c.values[j * c.count + i];
  return v;
}

// Rank r's nodes: its chunks folded as far as the tree allows (what ChunkedGradients leaves).
std::vector<std::pair<ct::Node, Buf>> rank_nodes(const TreeConfig& c, int r) {
  const ct::Range mine = ct::rank_chunks(c.chunks, c.world, r);
  ct::Accumulator<Buf, AddInto> acc(c.chunks, AddInto{});
  for (size_t j = mine.begin; j < mine.end; ++j) acc.push(j, chunk_values(c, j));
  return acc.take();
}

// Every rank's result of the real chunk_tree_all_reduce, or of the ring's way (each rank's chunks
// added in order, then all_reduce).
std::vector<Buf> run_ranks(const TreeConfig& c, bool ring) {
  comm::CommOptions o;
  o.timeout = comm::Millis(60000);
  o.algo = comm::Algo::Ring;  // the ring at every size (auto would pick another for so few bytes)
  auto comms = comm::make_mem_communicators(c.world, o);
  std::vector<Buf> out(c.world, Buf(c.count));
  std::vector<std::exception_ptr> errors(c.world);
  std::vector<std::thread> threads;
  for (int r = 0; r < c.world; ++r)
    threads.emplace_back([&, r] {
      try {
        const ct::Range mine = ct::rank_chunks(c.chunks, c.world, r);
        if (ring) {
          out[r] = chunk_values(c, mine.begin);
          for (size_t j = mine.begin + 1; j < mine.end; ++j) AddInto{}(out[r], chunk_values(c, j));
          comms[r]->all_reduce(out[r].data(), c.count, DType::F32, comm::ReduceOp::Sum);
          return;
        }
        const auto nodes = rank_nodes(c, r);
        std::vector<comm::TreePartial> parts;
        for (const auto& [node, v] : nodes) parts.push_back({node, v.data()});
        comms[r]->chunk_tree_all_reduce(c.chunks, parts, out[r].data(), c.count, DType::F32);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

size_t differing(const Buf& a, const Buf& b) {
  size_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return n;
}

std::string describe_tree(const TreeConfig& c) {
  std::string s = fmt("The tree over %zu chunks (fixed by the chunks alone, never by W):\n  %s\n",
                      c.chunks, expression(ct::root(c.chunks), c.chunks).c_str());
  s += fmt("\nRanks take whole chunks, fold them as far as the tree allows, and hold:\n");
  for (int r = 0; r < c.world; ++r) {
    const ct::Range mine = ct::rank_chunks(c.chunks, c.world, r);
    s += fmt("  rank %d: chunks %zu..%zu ->", r, mine.begin, mine.end - 1);
    for (const ct::Node& node : ct::cover(c.chunks, mine))
      s.append(" ").append(node.str()).append(" = ").append(expression(node, c.chunks)).append(";");
    s.back() = '\n';
  }
  s +=
      "\nEach element's slice has an owner, who adds every rank's nodes there in the tree's order\n"
      "(nothing is added on the way), then sends the sum back:\n";
  for (int r = 0; r < c.world; ++r) {
    const ct::Range sl = ct::even_split(c.count, static_cast<size_t>(c.world), r);
    s += sl.empty() ? fmt("  rank %d owns no element\n", r)
                    : fmt("  rank %d owns elements %zu..%zu\n", r, sl.begin, sl.end - 1);
  }
  return s;
}

// Rank c.lose is lost: the others regroup (the real protocol, threads over one store), and the
// tree sums again over the W - 1 survivors; *same: still one process's bits on every rank.
std::string shrink(const TreeConfig& c, const Buf& one, bool* same) {
  comm::MemStore store;
  const comm::Membership g0 = comm::initial_membership(0, c.world);
  std::vector<comm::Membership> got(c.world);
  std::vector<std::thread> threads;
  for (int r = 0; r < c.world; ++r)
    if (r != c.lose)
      threads.emplace_back([&, r] {
        comm::Membership me = g0;
        me.rank = r;
        got[r] = comm::regroup(store, me, 1, {c.lose}, comm::Millis(60000));
      });
  for (auto& t : threads) t.join();
  const comm::Membership& g1 = got[c.lose == 0 ? 1 : 0];
  std::string s = fmt("\nRank %d is lost (train --on-rank-loss continue). ", c.lose);
  s +=
      "Every survivor registers in the store\n(elastic/1/joined/<id>, with the ranks it saw lost); "
      "the first to register closes generation\n1 once each rank of generation 0 has registered or "
      "been seen lost: members ";
  s += comm::id_list(g1.ids) + ".\nA member's rank is now its place in that list:";
  for (int r = 0; r < g1.world(); ++r)
    s += fmt(" %d -> %d%s", g1.ids[r], r, r + 1 < g1.world() ? "," : ".\n");
  TreeConfig c1 = c;
  c1.world = g1.world();
  c1.lose = -1;
  s += "\nThe same tree; the survivors take its chunks between them:\n";
  for (int r = 0; r < c1.world; ++r) {
    const ct::Range mine = ct::rank_chunks(c1.chunks, c1.world, r);
    s += fmt("  rank %d (was %d): chunks %zu..%zu\n", r, g1.ids[r], mine.begin, mine.end - 1);
  }
  const std::vector<Buf> tree = run_ranks(c1, false);
  *same = true;
  for (int r = 0; r < c1.world; ++r) *same = *same && differing(tree[r], one) == 0;
  s += fmt("The tree at %d ranks: %s on every rank, bit for bit:\nthe job goes on where it was.\n",
           c1.world, *same ? "the same as one process" : "NOT the same as one process");
  return s;
}

}  // namespace

void check_tree_config(const TreeConfig& c) {
  ENGINE_CHECK(c.chunks >= 1 && c.chunks <= 64, "--chunks must be 1..64, got ", c.chunks);
  ENGINE_CHECK(c.world >= 1 && static_cast<size_t>(c.world) <= c.chunks, "--world-size ", c.world,
               " ranks cannot take whole chunks of ", c.chunks, " (want 1 .. --chunks)");
  ENGINE_CHECK(c.count >= 1 && c.count <= 64, "--count must be 1..64 with --algo chunk-tree, got ",
               c.count);
  ENGINE_CHECK(c.lose < 0 || (c.world >= 2 && c.lose < c.world), "--lose ", c.lose,
               " needs --world-size 2 or more and a rank 0 .. W-1 (W = ", c.world, ")");
  ENGINE_CHECK(c.values.empty() || c.values.size() == c.chunks * c.count, "--values: want ",
               c.chunks * c.count, " numbers (", c.chunks, " chunks x ", c.count, "), got ",
               c.values.size());
}

std::string chunk_tree_demo(const TreeConfig& c, bool* same) {
  check_tree_config(c);
  std::string s =
      fmt("The fixed chunk tree (train --world-invariant's sum): %zu chunks of %zu floats, %d "
          "ranks\n\n",
          c.chunks, c.count, c.world);
  s += describe_tree(c);
  std::vector<std::pair<ct::Node, Buf>> all;
  for (size_t j = 0; j < c.chunks; ++j) all.emplace_back(ct::Node{0, j}, chunk_values(c, j));
  const Buf one = ct::fold(c.chunks, std::move(all), AddInto{});
  const std::vector<Buf> tree = run_ranks(c, false), ring = run_ranks(c, true);
  *same = true;
  for (int r = 0; r < c.world; ++r) *same = *same && differing(tree[r], one) == 0;
  s += "\nelement  one process (the tree)  the tree at W ranks  the ring's way at W ranks\n";
  for (size_t i = 0; i < c.count; ++i)
    s += fmt("%7zu  %22.9g  %19.9g  %19.9g%s\n", i, one[i], tree[0][i], ring[0][i],
             std::memcmp(&ring[0][i], &one[i], sizeof(float)) ? "  (other bits)" : "");
  s += fmt("\nThe tree: %s on every rank, bit for bit.\n",
           *same ? "the same as one process" : "NOT the same as one process");
  s +=
      fmt("The ring's way: %zu of %zu elements with other bits than one process (the chunks are\n"
          "added per rank, then the ranks in ring order: the association changes with W).\n",
          differing(ring[0], one), c.count);
  if (c.lose >= 0) {
    bool after = false;
    s += shrink(c, one, &after);
    *same = *same && after;
  }
  return s;
}

}  // namespace engine::ring_demo
