// apps/flags.h: the programs' command-line flags: `--name value` or `--name=value`, each flag
// declared once with its help text; unknown flags, missing values and bad numbers are errors
// that name the flag.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"

namespace engine::apps {

class Flags {
 public:
  explicit Flags(std::string usage) : usage_(std::move(usage)) {}

  void add(const std::string& name, std::string* target, const std::string& help) {
    declare(name, help, *target, [target](const std::string& v) { *target = v; });
  }
  void add(const std::string& name, int64_t* target, const std::string& help) {
    declare(name, help, std::to_string(*target),
            [target, name](const std::string& v) { *target = parse_int(name, v); });
  }
  void add(const std::string& name, double* target, const std::string& help) {
    std::ostringstream d;
    d << *target;
    declare(name, help, d.str(),
            [target, name](const std::string& v) { *target = parse_double(name, v); });
  }
  // A flag with a fixed set of values, e.g. --shuffle on|off.
  void add_choice(const std::string& name, std::string* target,
                  const std::vector<std::string>& choices, const std::string& help) {
    std::string all;
    for (auto& c : choices) all += (all.empty() ? "" : "|") + c;
    declare(name, help + " (" + all + ")", *target, [=](const std::string& v) {
      for (auto& c : choices)
        if (v == c) {
          *target = v;
          return;
        }
      ENGINE_FAIL("--", name, ": '", v, "' is not one of ", all);
    });
  }
  // A flag without a value.
  void add_switch(const std::string& name, bool* target, const std::string& help) {
    switches_[name] = target;
    help_.push_back({name, help, ""});
  }

  // Parses argv; returns false when --help was asked for (usage already printed).
  // Arguments after a bare "--" are returned in rest().
  bool parse(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--") {
        for (int j = i + 1; j < argc; ++j) rest_.push_back(argv[j]);
        break;
      }
      if (a == "--help" || a == "-h") {
        print_help();
        return false;
      }
      ENGINE_CHECK(a.rfind("--", 0) == 0, "unexpected argument '", a, "' (see --help)");
      std::string name = a.substr(2), value;
      bool inline_value = false;
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        inline_value = true;
      }
      if (auto s = switches_.find(name); s != switches_.end()) {
        ENGINE_CHECK(!inline_value, "--", name, " takes no value");
        *s->second = true;
        given_.push_back(name);
        continue;
      }
      auto it = setters_.find(name);
      ENGINE_CHECK(it != setters_.end(), "unknown flag --", name, " (see --help)");
      if (!inline_value) {
        ENGINE_CHECK(i + 1 < argc, "--", name, " needs a value");
        value = argv[++i];
      }
      it->second(value);
      given_.push_back(name);
    }
    return true;
  }

  bool given(const std::string& name) const {
    for (auto& g : given_)
      if (g == name) return true;
    return false;
  }
  const std::vector<std::string>& rest() const { return rest_; }

  void print_help() const {
    std::printf("%s\n\nFlags:\n", usage_.c_str());
    for (auto& h : help_) {
      std::string left = "  --" + h.name;
      std::printf("%-22s %s%s\n", left.c_str(), h.help.c_str(),
                  h.def.empty() ? "" : (" [default: " + h.def + "]").c_str());
    }
  }

  static int64_t parse_int(const std::string& name, const std::string& v) {
    char* end = nullptr;
    long long x = std::strtoll(v.c_str(), &end, 10);
    ENGINE_CHECK(!v.empty() && end && *end == 0, "--", name, ": '", v, "' is not an integer");
    return x;
  }
  static double parse_double(const std::string& name, const std::string& v) {
    char* end = nullptr;
    double x = std::strtod(v.c_str(), &end);
    ENGINE_CHECK(!v.empty() && end && *end == 0, "--", name, ": '", v, "' is not a number");
    return x;
  }

 private:
  struct Help {
    std::string name, help, def;
  };
  void declare(const std::string& name, const std::string& help, const std::string& def,
               std::function<void(const std::string&)> set) {
    setters_[name] = std::move(set);
    help_.push_back({name, help, def});
  }
  std::string usage_;
  std::map<std::string, std::function<void(const std::string&)>> setters_;
  std::map<std::string, bool*> switches_;
  std::vector<Help> help_;
  std::vector<std::string> given_, rest_;
};

// The items of a comma-separated flag value ("a,b,,c" -> a, b, "", c; "" -> one empty item).
inline std::vector<std::string> split_commas(const std::string& text) {
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
