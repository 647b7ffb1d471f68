// tests/report/test_training_plot.cpp: the training plot of report/training_plot: well-formed SVG
// (libxml2, tests/common/xml_check.h) for typical, long, empty and odd inputs; nice axis ticks.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "report/training_plot.h"
#include "tests/common/temp_dir.h"
#include "tests/common/xml_check.h"

namespace {

using engine::report::nice_ticks;
using engine::report::training_plot_svg;

std::map<std::string, int> expect_well_formed(const std::string& svg) {
  const engine::testing::XmlCheck x = engine::testing::check_xml(svg);
  EXPECT_TRUE(x.ok) << x.error << "\n" << svg.substr(0, 2000);
  EXPECT_EQ(x.root, "svg");
  EXPECT_NE(svg.find("xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  return x.counts;
}

}  // namespace

TEST(TrainingPlot, TypicalRunIsWellFormedWithAxesAndLabels) {
  std::vector<double> loss;
  for (int i = 0; i < 300; ++i) loss.push_back(2.3 * std::exp(-i / 80.0) + 0.05 * std::sin(i));
  const std::vector<std::pair<int64_t, double>> acc = {{100, 0.912}, {200, 0.955}, {300, 0.9731}};
  const std::string svg = training_plot_svg(loss, acc, "simplecnn, 2 ranks <bucketed> & co");
  auto n = expect_well_formed(svg);
  EXPECT_GE(n["polyline"], 3);  // loss, its moving average, accuracy
  EXPECT_EQ(n["circle"], 3);    // a point per epoch
  for (const char* want : {"training loss", "test accuracy", "step", "97.31%",
                           "simplecnn, 2 ranks &lt;bucketed&gt; &amp; co", "mean of the last"})
    EXPECT_NE(svg.find(want), std::string::npos) << want;
}

TEST(TrainingPlot, EmptyShortLongAndOddInputs) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  auto none = training_plot_svg({}, {}, "");
  expect_well_formed(none);
  EXPECT_NE(none.find("no loss recorded"), std::string::npos);
  EXPECT_NE(none.find("no test accuracy yet"), std::string::npos);
  expect_well_formed(training_plot_svg({1.0}, {{1, 50.0}}, "one step, percent"));
  expect_well_formed(training_plot_svg({0.5, 0.5, 0.5}, {}, "flat"));
  auto odd = training_plot_svg({2.0, nan, inf, 1.0}, {{2, nan}, {4, 1.0}}, "odd");
  expect_well_formed(odd);
  EXPECT_NE(odd.find("2 non-finite skipped"), std::string::npos);
  EXPECT_EQ(odd.find("nan"), std::string::npos);
  EXPECT_EQ(odd.find("inf"), std::string::npos);
  // 100,000 steps: decimated to about two points per pixel column, so the file stays small.
  std::vector<double> many(100000);
  for (size_t i = 0; i < many.size(); ++i) many[i] = 1.0 / (1 + i * 1e-3) + (i % 7) * 0.01;
  const std::string big = training_plot_svg(many, {{50000, 0.98}, {100000, 0.99}}, "long");
  expect_well_formed(big);
  EXPECT_LT(big.size(), 200000u);
}

TEST(TrainingPlot, NiceTicksAreRoundAndCoverTheRange) {
  auto t = nice_ticks(0, 937, 8);
  ASSERT_GE(t.size(), 2u);
  EXPECT_LE(t.front(), 0);
  EXPECT_GE(t.back(), 937);
  EXPECT_EQ(t[1] - t[0], 100);
  t = nice_ticks(0.03, 2.31, 6);
  EXPECT_LE(t.front(), 0.03);
  EXPECT_GE(t.back(), 2.31);
  EXPECT_NEAR(t[1] - t[0], 0.5, 1e-12);
  t = nice_ticks(5, 5, 4);  // a flat series still gets an axis
  EXPECT_LT(t.front(), 5);
  EXPECT_GT(t.back(), 5);
}

TEST(TrainingPlot, WritesTheFile) {
  const engine::testing::TempDir dir;
  const std::string path = dir.file("plot.svg");
  engine::report::write_training_plot(path, {3, 2, 1}, {{3, 0.5}}, "t");
  expect_well_formed(engine::testing::read_text(path));
  EXPECT_THROW(engine::report::write_training_plot("/nonexistent/dir/p.svg", {1}, {}, "t"),
               engine::Error);
}
