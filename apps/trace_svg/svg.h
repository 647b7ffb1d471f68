// apps/trace_svg/svg.h: the few SVG-writing helpers the timeline needs: printf into a string,
// XML escaping, category colours, text width estimates and round axis ticks.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "io/svg_text.h"

namespace engine::trace_svg {

// Fill colour of a category ("#rrggbb"); unknown categories share one neutral colour.
const char* category_colour(const std::string& category);
// c mixed with white: f = 0 gives c, f = 1 white.
std::string lighten(const std::string& c, double f);
// "#222" or "#fff", whichever reads better on fill c.
const char* text_colour_on(const std::string& c);

// Width in pixels that `s` takes in a sans-serif font of `size` px, slightly generous, so a label
// judged to fit does fit; UTF-8 continuation bytes do not count.
double text_width(const std::string& s, double size);
// The longest prefix of s, plus "…", no wider than width; "" when not even 2 characters fit.
std::string truncate_to(const std::string& s, double width, double size);

// Round ticks (1, 2 or 5 x 10^k apart) covering [lo, hi] with about `target` intervals.
std::vector<double> nice_ticks(double lo, double hi, int target);
// A tick value without trailing zeros ("0", "2.5", "10").
std::string tick_label(double v);

}  // namespace engine::trace_svg
