// apps/flags.cpp: see flags.h.
#include "apps/flags.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

namespace engine::apps {

void Flags::add(const std::string& name, std::string* target, const std::string& help) {
  declare(
      name, help, *target, [target](const std::string& v) { *target = v; },
      [target] { return *target; });
}

void Flags::add(const std::string& name, int64_t* target, const std::string& help) {
  declare(
      name, help, std::to_string(*target),
      [target, name](const std::string& v) { *target = parse_int(name, v); },
      [target] { return std::to_string(*target); });
}

void Flags::add(const std::string& name, double* target, const std::string& help) {
  std::ostringstream d;
  d << *target;
  declare(
      name, help, d.str(),
      [target, name](const std::string& v) { *target = parse_double(name, v); },
      [target] { return format_double(*target); });
}

void Flags::add_choice(const std::string& name, std::string* target,
                       const std::vector<std::string>& choices, const std::string& help) {
  std::string all;
  for (auto& c : choices) all += (all.empty() ? "" : "|") + c;
  declare(
      name, help + " (" + all + ")", *target,
      [=](const std::string& v) {
        for (auto& c : choices)
          if (v == c) {
            *target = v;
            return;
          }
        throw UsageError(detail::concat("--", name, ": '", v, "' is not one of ", all));
      },
      [target] { return *target; });
}

void Flags::add_switch(const std::string& name, bool* target, const std::string& help) {
  switches_[name] = target;
  help_.push_back(
      {name, help, "", false, section_, [target] { return *target ? "given" : "not given"; }});
}

void Flags::require(const std::string& name) {
  required_.push_back(name);
  for (Help& h : help_)
    if (h.name == name) h.required = true;
}

bool Flags::parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      rest_.insert(rest_.end(), argv + i + 1, argv + argc);
      break;
    }
    if (a == "--help" || a == "-h") {
      print_help();
      return false;
    }
    if (passes_through(a)) {
      passed_.push_back(a);
      continue;
    }
    if (a.rfind("-", 0) != 0 && stop_at_positional_) {
      rest_.insert(rest_.end(), argv + i, argv + argc);
      break;
    }
    ENGINE_USAGE_CHECK(a.rfind("--", 0) == 0, "unexpected argument '", a, "'");
    parse_flag(a, argc, argv, &i);
  }
  for (const std::string& name : required_)
    ENGINE_USAGE_CHECK(given(name), "--", name, " is required");
  return true;
}

void Flags::parse_flag(const std::string& arg, int argc, char** argv, int* i) {
  std::string name = arg.substr(2), value;
  const size_t eq = name.find('=');
  const bool inline_value = eq != std::string::npos;
  if (inline_value) {
    value = name.substr(eq + 1);
    name.resize(eq);
  }
  if (underscores_)
    for (char& c : name)
      if (c == '_') c = '-';
  if (auto r = retired_.find(name); r != retired_.end()) throw UsageError(r->second);
  if (auto s = switches_.find(name); s != switches_.end()) {
    ENGINE_USAGE_CHECK(!inline_value, "--", name, " takes no value");
    *s->second = true;
    given_.push_back(name);
    return;
  }
  auto it = setters_.find(name);
  ENGINE_USAGE_CHECK(it != setters_.end(), "unknown flag --", name);
  if (!inline_value) {
    ENGINE_USAGE_CHECK(*i + 1 < argc, "--", name, " needs a value");
    value = argv[++*i];
  }
  it->second(value);
  given_.push_back(name);
}

bool Flags::passes_through(const std::string& arg) const {
  for (const std::string& p : pass_prefixes_)
    if (arg.rfind(p, 0) == 0) return true;
  return false;
}

bool Flags::given(const std::string& name) const {
  for (auto& g : given_)
    if (g == name) return true;
  return false;
}

void Flags::print_help() const {
  std::printf("%s\n", usage_.c_str());
  for (size_t i = 0; i < help_.size(); ++i) {
    const Help& h = help_[i];
    if (i == 0 || h.section != help_[i - 1].section)
      std::printf("\n%s:\n", h.section.empty() ? "Flags" : h.section.c_str());
    const std::string left = "  --" + h.name;
    const std::string def = h.required      ? " [required]"
                            : h.def.empty() ? ""
                                            : " [default: " + h.def + "]";
    std::printf("%-22s %s%s\n", left.c_str(), h.help.c_str(), def.c_str());
  }
}

int64_t Flags::parse_int(const std::string& name, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  ENGINE_USAGE_CHECK(!v.empty() && end && *end == 0, "--", name, ": '", v, "' is not an integer");
  ENGINE_USAGE_CHECK(errno != ERANGE, "--", name, ": '", v, "' is out of range (",
                     std::numeric_limits<int64_t>::min(), " .. ",
                     std::numeric_limits<int64_t>::max(), ")");
  return x;
}

double Flags::parse_double(const std::string& name, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(v.c_str(), &end);
  ENGINE_USAGE_CHECK(!v.empty() && end && *end == 0, "--", name, ": '", v, "' is not a number");
  ENGINE_USAGE_CHECK(std::isfinite(x) && !(errno == ERANGE && x != 0), "--", name, ": '", v,
                     "' is not a finite number");
  return x;
}

void check_range(const std::string& flag, int64_t v, int64_t lo, int64_t hi) {
  ENGINE_USAGE_CHECK(v >= lo && v <= hi, flag, " must be ", lo, " .. ", hi, ", got ", v);
}

void Flags::declare(const std::string& name, const std::string& help, const std::string& def,
                    std::function<void(const std::string&)> set, std::function<std::string()> get) {
  setters_[name] = std::move(set);
  help_.push_back({name, help, def, false, section_, std::move(get)});
}

std::vector<Flags::Value> Flags::values() const {
  std::vector<Value> out;
  for (const Help& h : help_) out.push_back({h.name, h.get()});
  return out;
}

std::string Flags::format_double(double x) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (;;) {
    const size_t comma = text.find(',', pos);
    out.push_back(text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    if (comma == std::string::npos) return out;
    pos = comma + 1;
  }
}

}  // namespace engine::apps
