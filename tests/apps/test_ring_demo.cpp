// tests/apps/test_ring_demo.cpp: the built `ring_demo` end to end: its printed final buffers equal
// the direct computation for W = 1..8 and awkward counts, every op; its steps are deterministic;
// its SVG and HTML are well-formed (libxml2, tests/common/xml_check.h); the page's first frame fits
// a 1280 x 800 window and its keys do not scroll it, and the texts of the --algo pictures do not
// overlap (headless Chromium); --compare prints a row per world size; --algo chunk-tree equals one
// process bit for bit at every world size while the ring's way does not; bad flags exit 2.
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/run.h"
#include "tests/common/temp_dir.h"
#include "tests/common/xml_check.h"

namespace ring_demo_test {

using engine::testing::check_xml;
using engine::testing::read_text;
using engine::testing::RunResult;
using engine::testing::XmlCheck;

namespace fs = std::filesystem;

const std::string kDemo = std::string(ENGINE_BUILD_DIR) + "/apps/ring_demo";

// ring_demo <args>: its exit code, stdout and stderr.
RunResult run(const std::string& args) {
  return engine::testing::run(kDemo + " " + args);
}

// The "Result" section: rank -> its printed final buffer (chunk marks dropped), and the verdicts.
struct Final {
  std::map<int, std::vector<double>> buffers;
  std::map<int, std::string> verdicts;
  int chunk_marks = 0;  // '|' on rank 0's line
};

Final parse_final(const std::string& out) {
  Final f;
  const size_t at = out.find("\nResult, checked against");
  if (at == std::string::npos) return f;
  std::istringstream in(out.substr(at + 1));
  std::string line;
  std::getline(in, line);  // the heading
  while (std::getline(in, line) && line.rfind("  rank ", 0) == 0) {
    std::istringstream ls(line.substr(7));
    int rank = -1;
    ls >> rank;
    std::string tok;
    std::vector<double> vals;
    while (ls >> tok) {
      if (tok == "|") {
        if (rank == 0) ++f.chunk_marks;
        continue;
      }
      if (tok == "OK" || tok == "MISMATCH") {
        f.verdicts[rank] = tok;
        continue;
      }
      vals.push_back(std::stod(tok));
    }
    f.buffers[rank] = vals;
  }
  return f;
}

// One folder for the suite's files, removed at exit.
const fs::path& tmp_dir() {
  static const engine::testing::TempDir d;
  return d.path();
}

class RingDemo : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(fs::exists(kDemo)) << kDemo << " is missing: build the ring_demo target";
  }
};

TEST_F(RingDemo, FinalBuffersEqualTheDirectSumForEveryWorldSizeAndAwkwardCounts) {
  for (int W = 1; W <= 8; ++W) {
    std::set<int> counts = {0, 1, W - 1, W + 1, 13};
    for (int N : counts) {
      SCOPED_TRACE("W=" + std::to_string(W) + " N=" + std::to_string(N));
      RunResult r = run("--world-size " + std::to_string(W) + " --count " + std::to_string(N));
      ASSERT_EQ(r.code, 0) << r.output;
      Final f = parse_final(r.output);
      ASSERT_EQ(f.buffers.size(), static_cast<size_t>(W)) << r.output;
      EXPECT_EQ(f.chunk_marks, W + 1);  // W chunks: W+1 boundaries
      for (int rank = 0; rank < W; ++rank) {
        ASSERT_EQ(f.buffers[rank].size(), static_cast<size_t>(N)) << r.output;
        EXPECT_EQ(f.verdicts[rank], "OK");
        for (int i = 0; i < N; ++i) {
          double want = 0;
          for (int q = 0; q < W; ++q) want += q * 100 + i;
          EXPECT_EQ(f.buffers[rank][i], want) << "rank " << rank << " element " << i;
        }
      }
      EXPECT_NE(r.output.find("ring optimum"), std::string::npos);
      EXPECT_EQ(r.output.find("MISMATCH"), std::string::npos) << r.output;
    }
  }
}

TEST_F(RingDemo, OpsAndValuesMatchTheDirectComputation) {
  // W = 3, N = 5: rank-major inputs with negative and fractional values.
  const std::vector<double> in = {1.5, -2, 3, 40, 0.25, -7, 8, 9.5, -10, 11, 12, 13, -14, 15, 16};
  std::string list;
  for (double v : in) {
    if (!list.empty()) list += ',';
    list += std::to_string(v);
  }
  for (std::string op : {"sum", "avg", "max"}) {
    for (const char* seg : {"", " --segment 2"}) {
      SCOPED_TRACE(op + seg);
      RunResult r = run("--world-size 3 --op " + op + " --values " + list + seg);
      ASSERT_EQ(r.code, 0) << r.output;
      Final f = parse_final(r.output);
      ASSERT_EQ(f.buffers.size(), 3u);
      for (int rank = 0; rank < 3; ++rank)
        for (int i = 0; i < 5; ++i) {
          double want = op == "max" ? -1e30 : 0;
          for (int q = 0; q < 3; ++q)
            want = op == "max" ? std::max(want, in[q * 5 + i]) : want + in[q * 5 + i];
          if (op == "avg") want /= 3;
          EXPECT_NEAR(f.buffers[rank][i], want, 1e-5) << "rank " << rank << " element " << i;
        }
    }
  }
}

TEST_F(RingDemo, PrintsEveryStepOfEveryRankDeterministically) {
  RunResult a = run("--world-size 4 --count 8"), b = run("--world-size 4 --count 8");
  ASSERT_EQ(a.code, 0) << a.output;
  EXPECT_EQ(a.output, b.output);  // observer events are printed in (phase, step, rank) order
  for (const char* want :
       {"reduce-scatter step 1 of 3", "reduce-scatter step 3 of 3", "all-gather step 3 of 3",
        "rank 0  sends c0 [0 1] -> rank 1; gets c3 [306 307] from rank 3, adds: c3 = [312 314]",
        "          | 0 1 | 2 3 | 4 5 | 312 314 |", "rank 1  48 B in 6 steps",
        "2(W-1)/W x 32 B = 48 B per rank", "All 4 ranks OK."})
    EXPECT_NE(a.output.find(want), std::string::npos) << want << "\n" << a.output;
  // Each step shows one send line per rank.
  const std::regex send_line(R"(\n  rank \d+ +sends c\d)");
  const auto sends = std::distance(
      std::sregex_iterator(a.output.begin(), a.output.end(), send_line), std::sregex_iterator());
  EXPECT_EQ(sends, 2 * 3 * 4);
  // Pipelined (several segments a chunk) still checks out.
  RunResult c = run("--world-size 5 --count 60 --segment 3");
  ASSERT_EQ(c.code, 0) << c.output;
  EXPECT_NE(c.output.find("segments a step"), std::string::npos);
  // Large counts: ranges instead of values, checked all the same.
  RunResult d = run("--world-size 3 --count 5000");
  ASSERT_EQ(d.code, 0) << d.output;
  EXPECT_NE(d.output.find("5000 elements, OK"), std::string::npos) << d.output;
}

TEST_F(RingDemo, SvgAndHtmlAreWellFormedAndSelfContained) {
  for (int W : {1, 2, 4, 7}) {
    SCOPED_TRACE("W=" + std::to_string(W));
    const std::string svg = (tmp_dir() / (std::to_string(W) + "_ranks.svg")).string();
    const std::string html = (tmp_dir() / (std::to_string(W) + "_ranks.html")).string();
    RunResult r = run("--world-size " + std::to_string(W) + " --count 9 --op avg --svg " + svg +
                      " --html " + html);
    ASSERT_EQ(r.code, 0) << r.output;
    const int frames = 2 * (W - 1) + 1;

    const std::string s = read_text(svg);
    XmlCheck x = check_xml(s);
    ASSERT_TRUE(x.ok) << x.error;
    EXPECT_EQ(x.root, "svg");
    std::map<std::string, int>& n = x.counts;
    EXPECT_NE(s.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
    EXPECT_GE(n["g"], frames);
    EXPECT_EQ(n["marker"], 2 * frames);                  // two arrow heads defined per panel
    EXPECT_EQ(n["path"], 2 * frames + 2 * (W - 1) * W);  // ... and an arrow per rank per step
    EXPECT_EQ(s.find("all-gather step") != std::string::npos, W > 1);

    const std::string h = read_text(html);
    // The page is written as well-formed XML (HTML5 accepts it), so parse it as such.
    x = check_xml(h);
    ASSERT_TRUE(x.ok) << x.error;
    EXPECT_EQ(x.root, "html");
    EXPECT_EQ(n["script"], 1);
    EXPECT_EQ(n["svg"], frames + 1);  // one per frame and the legend
    EXPECT_EQ(n["button"], 2);
    EXPECT_EQ(n["div.frame"], frames);
    EXPECT_EQ(h.find("http://"), std::string::npos);
    EXPECT_EQ(h.find("https://"), std::string::npos);
    EXPECT_EQ(h.find(" src="), std::string::npos);
    for (const char* key : {"ArrowLeft", "ArrowRight", "Prev", "Next"})
      EXPECT_NE(h.find(key), std::string::npos) << key;
  }
}

// Headless Chromium on this machine ("" when none): Debian's chromium-headless-shell or chromium.
std::string find_chromium() {
  for (const char* b : {"chromium-headless-shell", "chromium", "chromium-browser"})
    if (engine::testing::run(std::string("command -v ") + b).code == 0) return b;
  return "";
}

// A probe (script that fills the array `out`) run after the page's own script; it leaves
// "PROBE <out's words> END" in the page.
std::string probe_script(const char* body) {
  return std::string("<script>\n(function () {") + body +
         "  var pre = document.createElement('pre');\n  pre.id = 'probe';\n"
         "  pre.textContent = 'PROBE ' + out.join(' ') + ' END';\n"
         "  document.body.appendChild(pre);\n})();\n</script>\n";
}

// What the probe, run after the page's own script in a 1280 x 800 window, saw: the first frame's
// box and the window, then per key the frame shown after it and whether the page took the key
// (preventDefault: no scrolling).
constexpr const char* kProbe = R"(
  var frames = document.querySelectorAll('.frame');
  var r = frames[0].getBoundingClientRect();
  var out = ['box', r.left, r.top, r.right, r.bottom, window.innerWidth, window.innerHeight];
  function shown() {
    for (var i = 0; frames.length > i; i++) if (frames[i].style.display !== 'none') return i;
    return -1;
  }
  function press(name, key, alt) {
    var e = new KeyboardEvent('keydown', {key: key, altKey: alt, bubbles: true, cancelable: true});
    document.dispatchEvent(e);
    out.push(name, shown(), e.defaultPrevented ? 1 : 0);
  }
  press('end', 'End', false);
  press('home', 'Home', false);
  press('right', 'ArrowRight', false);
  press('left', 'ArrowLeft', false);
  press('down', 'ArrowDown', false);
  press('altright', 'ArrowRight', true);
)";

// What the label probe saw, with every frame shown: per frame, the pairs of texts in its picture
// (titles, rank numbers, arrow labels) less than 2 px apart, and the arrows that run through a
// text (a segment through a box, clipped as Liang and Barsky do).
constexpr const char* kLabelProbe = R"(
  var out = [];
  function crosses(l, b) {
    var x0 = +l.getAttribute('x1'), y0 = +l.getAttribute('y1');
    var dx = l.getAttribute('x2') - x0, dy = l.getAttribute('y2') - y0;
    var p = [-dx, dx, -dy, dy];
    var q = [x0 - b.x, b.x + b.width - x0, y0 - b.y, b.y + b.height - y0];
    var t0 = 0, t1 = 1;
    for (var i = 0; 4 > i; i++) {
      if (p[i] === 0) {
        if (0 > q[i]) return false;
        continue;
      }
      var t = q[i] / p[i];
      if (0 > p[i]) t0 = Math.max(t0, t); else t1 = Math.min(t1, t);
    }
    return t1 > t0;
  }
  document.querySelectorAll('.frame').forEach(function (f) {
    f.style.display = '';
    var boxes = [], n = 0;
    f.querySelectorAll('svg text').forEach(function (t) { boxes.push(t.getBBox()); });
    for (var a = 0; boxes.length > a; a++)
      for (var b = a + 1; boxes.length > b; b++) {
        var p = boxes[a], q = boxes[b];
        var ox = Math.min(p.x + p.width, q.x + q.width) - Math.max(p.x, q.x);
        var oy = Math.min(p.y + p.height, q.y + q.height) - Math.max(p.y, q.y);
        if (ox > -2) if (oy > -2) n++;
      }
    f.querySelectorAll('svg line').forEach(function (l) {
      boxes.forEach(function (b) { if (crosses(l, b)) n++; });
    });
    out.push(n);
  });
)";

// The page of `ring_demo <args>` in headless Chromium: the probe's words, in order.
std::vector<std::string> probe_page(const std::string& chromium, const std::string& args,
                                    const char* probe = kProbe) {
  const fs::path html = tmp_dir() / "probe_source.html", page = tmp_dir() / "probe.html";
  const RunResult r = run(args + " --html " + html.string());
  EXPECT_EQ(r.code, 0) << r.output;
  std::string h = read_text(html.string());
  const size_t body = h.rfind("</body>");
  if (body == std::string::npos) return {};
  h.insert(body, probe_script(probe));
  std::ofstream(page) << h;
  const RunResult dom = engine::testing::run(
      "(timeout 120 " + chromium +
      " --headless --no-sandbox --disable-gpu --no-first-run --window-size=1280,800 --dump-dom "
      "file://" +
      page.string() + " 2> /dev/null)");
  const size_t at = dom.output.rfind("PROBE "), end = dom.output.find(" END", at);
  if (at == std::string::npos || end == std::string::npos) {
    ADD_FAILURE() << "no probe result from " << chromium << ":\n" << dom.output.substr(0, 2000);
    return {};
  }
  std::istringstream in(dom.output.substr(at + 6, end - at - 6));
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// Issues 21 and 27: the first frame fits a 1280 x 800 window (it spanned 388-918 px), and the keys
// the page handles (arrows, Home, End) do not also scroll it; the browser keeps the others.
TEST_F(RingDemo, PageFitsA1280By800WindowAndItsKeysDoNotScroll) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) GTEST_SKIP() << "no headless Chromium (Debian: chromium-headless-shell)";
  for (const char* args :
       {"", "--world-size 2", "--world-size 8 --count 16", "--world-size 16 --count 32"}) {
    SCOPED_TRACE(args);
    const std::vector<std::string> w = probe_page(chromium, args);
    ASSERT_EQ(w.size(), 7u + 6 * 3) << ::testing::PrintToString(w);
    ASSERT_EQ(w[0], "box");
    const double left = std::stod(w[1]), top = std::stod(w[2]), right = std::stod(w[3]),
                 bottom = std::stod(w[4]);
    EXPECT_EQ(w[5], "1280");
    EXPECT_EQ(w[6], "800");
    EXPECT_GE(left, 0);
    EXPECT_GE(top, 0);
    EXPECT_LE(right, 1280);
    EXPECT_LE(bottom, 800) << "the first frame ends below the window";
    const int frames = [&] {
      std::istringstream a(args);
      std::string flag;
      int world = 4;  // ring_demo's default
      while (a >> flag)
        if (flag == "--world-size") a >> world;
      return 2 * (world - 1) + 1;
    }();
    // name, frame shown after the key, taken by the page (1) or left to the browser (0)
    const std::vector<std::vector<std::string>> want = {{"end", std::to_string(frames - 1), "1"},
                                                        {"home", "0", "1"},
                                                        {"right", "1", "1"},
                                                        {"left", "0", "1"},
                                                        {"down", "0", "0"},
                                                        {"altright", "0", "0"}};
    for (size_t k = 0; k < want.size(); ++k)
      EXPECT_EQ(std::vector<std::string>(w.begin() + 7 + 3 * k, w.begin() + 10 + 3 * k), want[k]);
  }
}

// Issue 35: in the rd and rh pictures at W = 4 the exchanges 0-2 and 1-3 cross in the middle, and
// their four range labels printed on top of each other there, across the other pair's arrows. No
// two texts of a picture touch, and no arrow runs through a text.
TEST_F(RingDemo, AlgoPicturesKeepTheirLabelsApart) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) GTEST_SKIP() << "no headless Chromium (Debian: chromium-headless-shell)";
  for (const char* args :
       {"--world-size 4 --count 8 --algo rh", "--world-size 4 --count 8 --algo rd"}) {
    SCOPED_TRACE(args);
    const std::vector<std::string> w = probe_page(chromium, args, kLabelProbe);
    ASSERT_FALSE(w.empty());
    for (size_t k = 0; k < w.size(); ++k)
      EXPECT_EQ(w[k], "0") << "texts touching texts or arrows in frame " << k;
  }
}

// The check the SVG and HTML tests rely on (check_xml, libxml2) rejects what is not well-formed.
TEST(XmlCheck, RejectsWhatIsNotWellFormed) {
  for (const char* good :
       {"<?xml version=\"1.0\"?>\n<a x=\"1\"><b/>t &amp; &#60;</a>\n",
        "<?xml version=\"1.0\"?>\n<svg a=\"1\"><g><text>x &amp; y</text></g></svg>"}) {
    const XmlCheck x = check_xml(good);
    EXPECT_TRUE(x.ok) << good << ": " << x.error;
  }
  const XmlCheck counted = check_xml("<a><b class=\"p q\"/><b class=\"q\">x</b></a>");
  EXPECT_EQ(counted.root, "a");
  EXPECT_EQ(counted.counts,
            (std::map<std::string, int>{{"a", 1}, {"b", 2}, {"b.p", 1}, {"b.q", 2}}));
  for (const char* bad :
       {"<a><b></a></b>", "<a>", "<a></a><b></b>", "<a x=1></a>", "<a x=\"1\" x=\"2\"></a>",
        "<a>&nbsp;</a>", "<a>1 < 2</a>", "text", "<a x=\"<\"></a>", "", "<svg><g></svg>",
        "<svg><g/></svg><svg/>", "<svg a=1/>", "<svg a=\"1\" a=\"2\"/>", "<svg>a < b</svg>",
        "<svg>AT&T</svg>", "<svg>"})
    EXPECT_FALSE(check_xml(bad).ok) << bad;
}

// --algo rd|rh|tree: the real all_reduce by each algorithm, every round printed; its result checks
// against the direct computation for world sizes that are and are not powers of two.
TEST_F(RingDemo, EveryAlgorithmRunsChecksAndDraws) {
  for (const char* algo : {"rd", "rh", "tree"})
    for (int W : {1, 2, 3, 5, 8}) {
      const std::string tag = std::string(algo) + "_W" + std::to_string(W);
      SCOPED_TRACE(tag);
      const std::string svg = (tmp_dir() / (tag + ".svg")).string();
      const std::string html = (tmp_dir() / (tag + ".html")).string();
      RunResult r = run("--world-size " + std::to_string(W) + " --count 7 --op max --algo " + algo +
                        " --svg " + svg + " --html " + html);
      ASSERT_EQ(r.code, 0) << r.output;
      EXPECT_NE(r.output.find("every rank's buffer equals the direct computation"),
                std::string::npos)
          << r.output;
      if (W > 1) {
        EXPECT_NE(r.output.find("round 1 ("), std::string::npos) << r.output;
      }
      // max over rank r holding r*100 + i: the last rank's values.
      std::string last;
      for (int i = 0; i < 7; ++i) last += " " + std::to_string((W - 1) * 100 + i);
      EXPECT_NE(r.output.find("|" + last + " |"), std::string::npos) << r.output;
      XmlCheck x = check_xml(read_text(svg));
      ASSERT_TRUE(x.ok) << x.error;
      EXPECT_EQ(x.root, "svg");
      x = check_xml(read_text(html));
      ASSERT_TRUE(x.ok) << x.error;
      EXPECT_EQ(x.root, "html");
      EXPECT_EQ(x.counts["button"], 2);
    }
}

TEST_F(RingDemo, CompareHasARowPerWorldSize) {
  for (const char* args : {"--compare", "--compare --bytes 1000000", "--compare --count 250000"}) {
    SCOPED_TRACE(args);
    RunResult r = run(args);
    ASSERT_EQ(r.code, 0) << r.output;
    for (const char* want :
         {"alpha", "beta", "2(W-1) (alpha + B/(W beta))", "reduce+broadcast", "all-to-all"})
      EXPECT_NE(r.output.find(want), std::string::npos) << want;
    std::set<int> rows;
    std::istringstream in(r.output);
    std::string line;
    while (std::getline(in, line)) {
      int w = 0;
      char bar = 0;
      std::istringstream ls(line);
      if (ls >> w >> bar && bar == '|') rows.insert(w);
    }
    std::set<int> want;
    for (int w = 2; w <= 16; ++w) want.insert(w);
    EXPECT_EQ(rows, want) << r.output;
  }
  RunResult r = run("--compare --bytes 1000000");
  EXPECT_NE(r.output.find("1.000 MB"), std::string::npos) << r.output;
  // The measured half: every algorithm at W = 2, 4, 8 and three sizes, and where each wins.
  for (const char* want : {"Measured here", "rd measured / model", "rh measured / model",
                           "tree measured / model", "Where each wins"})
    EXPECT_NE(r.output.find(want), std::string::npos) << want;
  size_t rows = 0;
  for (size_t at = r.output.find(" KiB |"); at != std::string::npos;
       at = r.output.find(" KiB |", at + 1))
    ++rows;
  EXPECT_EQ(rows, 3u) << r.output;  // 64 KiB at W = 2, 4, 8
}

TEST_F(RingDemo, BadFlagsGiveAClearErrorAndStatus2) {
  struct Case {
    const char* args;
    const char* names;
  } cases[] = {{"--world-size 0", "--world-size"},
               {"--world-size 65", "--world-size"},
               {"--count -1", "--count"},
               {"--op median", "median"},
               {"--segment 1", "--segment"},
               {"--world-size 2 --values 1,2,3", "--values"},
               {"--world-size 2 --values 1,x", "--values"},
               {"--algo rd --segment 4", "--segment"},
               {"--algo bcube", "bcube"},
               {"--no-such-flag", "no-such-flag"}};
  for (const Case& c : cases) {
    RunResult r = run(c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.names), std::string::npos) << c.args << "\n" << r.output;
  }
  RunResult h = run("--help");
  EXPECT_EQ(h.code, 0);
  for (const char* f : {"--world-size", "--count", "--op", "--segment", "--svg", "--html",
                        "--values", "--compare", "--bytes", "Reduce-scatter", "All-gather"})
    EXPECT_NE(h.output.find(f), std::string::npos) << f;
}

// A shrinking world: rank 2 of 4 is lost, the survivors regroup through a store (the protocol of
// train --on-rank-loss continue) and the tree at 3 ranks still gives one process's bits.
TEST(RingDemoChunkTree, ARankLostAndTheSurvivorsSumTheSameBits) {
  const RunResult r = run("--algo chunk-tree --world-size 4 --chunks 6 --count 3 --lose 2");
  EXPECT_EQ(r.code, 0) << r.output;
  for (const char* line : {"Rank 2 is lost", "members 0, 1, 3.", "0 -> 0, 1 -> 1, 3 -> 2.",
                           "rank 2 (was 3): chunks 4..5",
                           "The tree at 3 ranks: the same as one process on every rank"})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  for (const char* bad : {"--lose 1", "--algo chunk-tree --world-size 1 --lose 0",
                          "--algo chunk-tree --world-size 3 --lose 3"}) {
    const RunResult b = run(bad);
    EXPECT_EQ(b.code, 2) << bad << "\n" << b.output;
  }
}

}  // namespace ring_demo_test

namespace ring_demo_test {

// --algo chunk-tree: the tree's sum equals one process's bit for bit at every world size up to
// the chunks, the ring's way gives other bits (here 1 of 6 elements at W = 4), and the flags that
// do not apply exit 2.
TEST(RingDemoChunkTree, TheTreeEqualsOneProcessAtEveryWorldSize) {
  for (int w = 1; w <= 6; ++w) {
    const RunResult r =
        run("--algo chunk-tree --chunks 6 --count 6 --world-size " + std::to_string(w));
    EXPECT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find("The tree: the same as one process on every rank, bit for bit."),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("((c0 + c1) + (c2 + c3)) + (c4 + c5)"), std::string::npos);
  }
  const RunResult four = run("--algo chunk-tree --chunks 6 --count 6 --world-size 4");
  EXPECT_NE(four.output.find("The ring's way: 1 of 6 elements with other bits"), std::string::npos)
      << four.output;
  for (const char* bad :
       {"--algo chunk-tree --svg x.svg", "--algo chunk-tree --op max", "--chunks 4",
        "--algo chunk-tree --world-size 8", "--algo chunk-tree --values 1,2,3"}) {
    const RunResult r = run(bad);
    EXPECT_EQ(r.code, 2) << bad << "\n" << r.output;
  }
}

}  // namespace ring_demo_test
