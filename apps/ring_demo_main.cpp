// apps/ring_demo_main.cpp: `ring_demo`, watch the real ring all-reduce of comm/ step by step, or
// another algorithm round by round (--algo rd|rh|tree), draw it (--svg, --html), or compare its
// modelled cost with simpler schemes and every algorithm's measured time (--compare).
// This file parses flags, prints and picks the exit code; apps/ring_demo/ does the work.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "apps/program.h"
#include "apps/ring_demo/algo_run.h"
#include "apps/ring_demo/chunk_tree_demo.h"
#include "apps/ring_demo/compare.h"
#include "apps/ring_demo/draw.h"
#include "apps/ring_demo/report.h"
#include "apps/ring_demo/run.h"
#include "io/atomic_file.h"

namespace {

const char kUsage[] =
    "usage: ring_demo [--world-size W] [--count N] [--op sum|avg|max] [--segment N]\n"
    "                 [--values v0,v1,...] [--svg FILE] [--html FILE] [--algo ring|rd|rh|tree]\n"
    "       ring_demo --algo chunk-tree [--world-size W] [--chunks C] [--count N] [--values ...]\n"
    "                 [--lose R]\n"
    "       ring_demo --compare [--bytes B | --count N] [--alpha-us A] [--beta-gbs G]\n"
    "\n"
    "Runs the real ring all-reduce of comm/ (the one data-parallel training uses) with W ranks as\n"
    "threads of this process, on values small enough to follow: rank r holds r*100 + i, or\n"
    "--values. It prints, step by step, what every rank sends, receives and holds.\n"
    "\n"
    "How the ring works: every rank cuts its buffer into W chunks and talks only to its two\n"
    "neighbours. Reduce-scatter, W-1 steps: each rank sends one chunk to the right and adds the\n"
    "chunk arriving from the left, so after W-1 steps rank r holds chunk (r+1) mod W summed over\n"
    "all ranks. All-gather, W-1 more steps: the completed chunks travel once round the ring. Each\n"
    "rank sends 2(W-1)/W of its buffer in all, whatever W is: the least any all-reduce can send.\n"
    "--algo rd|rh|tree shows the other all-reduce algorithms of comm/ the same way, round by\n"
    "round; --compare also runs every algorithm for real beside its cost model. --algo\n"
    "chunk-tree shows the sum train --world-invariant runs: over a fixed tree whose leaves are "
    "the\n"
    "C chunks of a batch, not the ranks, so its bits are the same at every W; beside the ring's.\n"
    "\n"
    "Exit status: 0 when every rank's result equals the direct computation, 1 when not or when\n"
    "the run failed, 2 for bad flags.\n"
    "\n"
    "examples: ring_demo --world-size 4 --count 8\n"
    "          ring_demo --world-size 3 --count 7 --op max --svg ring.svg --html ring.html\n"
    "          ring_demo --world-size 2 --count 2 --values 1,2,10,20\n"
    "          ring_demo --world-size 5 --count 10 --algo rh --svg rh.svg\n"
    "          ring_demo --algo chunk-tree --world-size 3 --chunks 6 --count 4\n"
    "          ring_demo --algo chunk-tree --world-size 4 --chunks 6 --count 3 --lose 2\n"
    "          ring_demo --compare --bytes 100000000";

std::vector<float> parse_values(const std::string& text) {
  std::vector<float> out;
  for (const std::string& item : engine::apps::split_commas(text)) {
    char* end = nullptr;
    const float v = std::strtof(item.c_str(), &end);
    ENGINE_USAGE_CHECK(!item.empty() && end && *end == 0, "--values: '", item,
                       "' is not a number (want a comma-separated list, e.g. 1,2,3)");
    out.push_back(v);
  }
  return out;
}

// --algo rd|rh|tree: the run, its text and pictures; 0 when every result checks.
int watch_algo(const engine::ring_demo::Config& cfg, engine::comm::Algo algo,
               const std::string& svg, const std::string& html) {
  using namespace engine;
  const ring_demo::AlgoRun run = ring_demo::run_algo_demo(cfg, algo);
  bool ok = false;
  std::fputs(ring_demo::algo_report(run, &ok).c_str(), stdout);
  if (!svg.empty()) {
    write_file_atomic(svg, ring_demo::render_algo_svg(run));
    std::printf("\nwrote %s\n", svg.c_str());
  }
  if (!html.empty()) {
    write_file_atomic(html, ring_demo::render_algo_html(run));
    std::printf("%swrote %s\n", svg.empty() ? "\n" : "", html.c_str());
  }
  return ok ? 0 : 1;
}

// --algo chunk-tree: its report; 0 when the tree's result equals one process's bit for bit.
int watch_chunk_tree(const engine::apps::Flags& flags, int64_t world, int64_t chunks, int64_t count,
                     const std::string& values, int64_t lose) {
  using namespace engine;
  for (const char* f : {"svg", "html", "segment", "op"})
    ENGINE_USAGE_CHECK(!flags.given(f), "--", f, " does not apply to --algo chunk-tree (a sum, ",
                       "shown as text)");
  ring_demo::TreeConfig c;
  ENGINE_USAGE_CHECK(
      world >= 1 && world <= 64 && chunks >= 1 && chunks <= 64 && count >= 1 && count <= 64,
      "--algo chunk-tree wants --world-size, --chunks and --count in 1..64");
  c.world = static_cast<int>(world);
  c.chunks = static_cast<size_t>(chunks);
  c.count = static_cast<size_t>(count);
  ENGINE_USAGE_CHECK(lose >= -1 && lose < 64, "--lose must be a rank 0 .. --world-size - 1");
  c.lose = static_cast<int>(lose);
  if (!values.empty()) {
    c.values = parse_values(values);
    if (!flags.given("count")) c.count = c.values.size() / c.chunks;
  }
  apps::as_usage_error([&] { ring_demo::check_tree_config(c); });
  bool same = false;
  std::fputs(ring_demo::chunk_tree_demo(c, &same).c_str(), stdout);
  return same ? 0 : 1;
}

// --compare: the cost models, then every algorithm measured.
int print_compare(double bytes, double alpha_us, double beta_gbs) {
  using namespace engine;
  ring_demo::CompareModel m;
  m.bytes = bytes;
  m.alpha_s = alpha_us * 1e-6;
  m.beta_Bps = beta_gbs * 1e9;
  ENGINE_USAGE_CHECK(m.bytes > 0 && m.alpha_s >= 0 && m.beta_Bps > 0,
                     "--compare wants --bytes > 0, --alpha-us >= 0 and --beta-gbs > 0");
  std::fputs(ring_demo::compare_table(m).c_str(), stdout);
  std::fflush(stdout);
  std::fputs(ring_demo::measured_compare().c_str(), stdout);
  return 0;
}

int run(int argc, char** argv) {
  using namespace engine;
  apps::Flags flags(kUsage);
  int64_t world = 4, count = 8, segment = 0;
  std::string op = "sum", svg, html, values, algo = "ring";
  bool compare = false;
  double bytes = 100e6, alpha_us = 50, beta_gbs = 1.5;
  flags.add("world-size", &world, "ranks in the ring (threads), 1..64");
  flags.add("count", &count, "float32 elements per rank (--compare: buffer of 4N bytes)");
  flags.add_choice("op", &op, {"sum", "avg", "max", "min", "prod"}, "the reduction");
  flags.add("segment", &segment,
            "pipelining grain in elements (>= 2); 0 = one segment per chunk, steps one by one");
  flags.add("values", &values,
            "W*N comma-separated inputs, rank 0's first (N taken from it without --count)");
  flags.add("svg", &svg, "write the steps as one SVG picture to FILE");
  flags.add("html", &html, "write a page stepping through the frames to FILE");
  int64_t chunks = 6;
  flags.add_choice("algo", &algo, {"ring", "rd", "rh", "tree", "chunk-tree"},
                   "the all-reduce to watch: ring, rd (recursive doubling), rh (Rabenseifner's "
                   "halving-doubling), tree (binomial reduce, then broadcast), chunk-tree (the "
                   "fixed tree over a batch's chunks of --world-invariant, text only)");
  flags.add("chunks", &chunks, "--algo chunk-tree: the batch's chunks, the tree's leaves (1..64)");
  int64_t lose = -1;
  flags.add("lose", &lose,
            "--algo chunk-tree: rank R is lost after the sum; the others regroup as train "
            "--on-rank-loss continue's ranks do and sum again (-1: none)");
  flags.add_switch("compare", &compare,
                   "print the cost model of ring vs reduce+broadcast vs all-to-all, then run "
                   "every all-reduce algorithm for real beside its model");
  flags.add("bytes", &bytes, "--compare: buffer size in bytes");
  flags.add("alpha-us", &alpha_us, "--compare: latency of one message, microseconds");
  flags.add("beta-gbs", &beta_gbs, "--compare: link bandwidth, GB/s");
  if (!flags.parse(argc, argv)) return 0;
  ENGINE_USAGE_CHECK(flags.rest().empty(), "unexpected argument '", flags.rest()[0], "'");

  if (compare)
    return print_compare(flags.given("count") ? 4.0 * static_cast<double>(count) : bytes, alpha_us,
                         beta_gbs);

  for (const char* f : {"chunks", "lose"})
    ENGINE_USAGE_CHECK(algo == "chunk-tree" || !flags.given(f), "--", f,
                       " applies to --algo chunk-tree only");
  if (algo == "chunk-tree") return watch_chunk_tree(flags, world, chunks, count, values, lose);

  ring_demo::Config cfg;
  ENGINE_USAGE_CHECK(world >= 1 && world <= ring_demo::kMaxWorld, "--world-size must be 1..",
                     ring_demo::kMaxWorld, ", got ", world);
  ENGINE_USAGE_CHECK(count >= 0, "--count must be >= 0, got ", count);
  ENGINE_USAGE_CHECK(segment >= 0, "--segment must be >= 0, got ", segment);
  cfg.world = static_cast<int>(world);
  cfg.op = comm::reduce_op_from_name(op);
  cfg.segment = static_cast<size_t>(segment);
  if (!values.empty()) {
    cfg.values = parse_values(values);
    if (!flags.given("count")) {
      ENGINE_USAGE_CHECK(cfg.values.size() % cfg.world == 0, "--values: ", cfg.values.size(),
                         " numbers do not split evenly over ", cfg.world, " ranks");
      count = static_cast<int64_t>(cfg.values.size()) / cfg.world;
    }
  }
  cfg.count = static_cast<size_t>(count);
  apps::as_usage_error([&] { ring_demo::check_config(cfg); });
  if (algo != "ring") {
    ENGINE_USAGE_CHECK(!flags.given("segment"), "--segment applies to --algo ring only");
    return watch_algo(cfg, comm::algo_from_name(algo), svg, html);
  }

  const ring_demo::DemoRun demo = ring_demo::run_demo(cfg);
  bool ok = false;
  std::fputs(ring_demo::full_report(demo, &ok).c_str(), stdout);
  if (!svg.empty()) {
    write_file_atomic(svg, ring_demo::render_svg(demo));
    std::printf("\nwrote %s\n", svg.c_str());
  }
  if (!html.empty()) {
    write_file_atomic(html, ring_demo::render_html(demo));
    std::printf("%swrote %s\n", svg.empty() ? "\n" : "", html.c_str());
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return engine::apps::run_program("ring_demo", argc, argv, run);
}
