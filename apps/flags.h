// apps/flags.h: the programs' command-line flags: `--name value` or `--name=value`, each flag
// declared once with its help text. Unknown flags, missing values, bad numbers and missing
// required flags throw UsageError naming the flag; apps/program.h turns that into exit code 2.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/threads.h"

namespace engine::apps {

// A mistake in how the program was called: a bad flag, value or combination of flags.
class UsageError : public Error {
 public:
  using Error::Error;
};

// ENGINE_USAGE_CHECK(cond, "message parts", ...): throws UsageError with the parts joined.
#define ENGINE_USAGE_CHECK(cond, ...)                                                     \
  do {                                                                                    \
    if (!(cond)) throw ::engine::apps::UsageError(::engine::detail::concat(__VA_ARGS__)); \
  } while (0)

class Flags {
 public:
  explicit Flags(std::string usage) : usage_(std::move(usage)) {}

  void add(const std::string& name, std::string* target, const std::string& help);
  void add(const std::string& name, int64_t* target, const std::string& help);
  void add(const std::string& name, double* target, const std::string& help);
  // A flag with a fixed set of values, e.g. --shuffle on|off.
  void add_choice(const std::string& name, std::string* target,
                  const std::vector<std::string>& choices, const std::string& help);
  // A flag without a value.
  void add_switch(const std::string& name, bool* target, const std::string& help);
  // parse() fails unless the flag is given; --help shows "[required]" instead of a default.
  void require(const std::string& name);
  // The flags declared after this call are listed under "title:" in --help (one topic each).
  void section(const std::string& title) { section_ = title; }
  // A flag that no longer exists: given (with or without a value), parse() throws UsageError with
  // message alone, e.g. what replaces it; --help does not list it.
  void retire(const std::string& name, const std::string& message) { retired_[name] = message; }

  // Arguments starting with `prefix` (e.g. "--benchmark_") are another parser's: parse() keeps
  // them, in order, in passed_through().
  void pass_through(const std::string& prefix) { pass_prefixes_.push_back(prefix); }
  // The first argument that is not a flag, and all after it, go to rest() (a launcher's
  // PROGRAM ARGS...); without this such an argument is an error.
  void stop_at_first_positional() { stop_at_positional_ = true; }
  // `--nproc_per_node` means `--nproc-per-node` (torchrun spells its flags both ways).
  void accept_underscores() { underscores_ = true; }

  // Parses argv; returns false when --help or -h was asked for (usage printed on stdout).
  // Arguments after a bare "--" are returned in rest(). Throws UsageError.
  bool parse(int argc, char** argv);

  bool given(const std::string& name) const;
  // Every declared flag, in declaration order, with its value now as text: a string or choice as
  // given (or its default), an integer in decimal, a number in the shortest form that reads back
  // to the same double (0.01, 1e-05), a switch "given" or "not given". Call it after parse().
  struct Value {
    std::string name, value;  // name without "--"
  };
  std::vector<Value> values() const;
  const std::vector<std::string>& rest() const { return rest_; }
  const std::vector<std::string>& passed_through() const { return passed_; }
  void print_help() const;

  // Throw UsageError naming --name when v is not an integer / a number: one that overflows
  // int64 or is not finite (inf, nan, 1e999) is refused, never clamped.
  static int64_t parse_int(const std::string& name, const std::string& v);
  static double parse_double(const std::string& name, const std::string& v);
  // The shortest text that parses back to exactly x ("0.01", "0.5", "1e-05").
  static std::string format_double(double x);

 private:
  struct Help {
    std::string name, help, def;
    bool required = false;
    std::string section;  // the --help heading it is listed under; "" before any section()
    std::function<std::string()> get;  // the value now, as values() gives it
  };
  void declare(const std::string& name, const std::string& help, const std::string& def,
               std::function<void(const std::string&)> set, std::function<std::string()> get);
  bool passes_through(const std::string& arg) const;
  // One "--name[=value]" at argv[*i]; consumes the value from argv[*i + 1] if it needs one.
  void parse_flag(const std::string& arg, int argc, char** argv, int* i);

  std::string usage_;
  std::map<std::string, std::function<void(const std::string&)>> setters_;
  std::map<std::string, bool*> switches_;
  std::map<std::string, std::string> retired_;
  std::string section_;
  std::vector<Help> help_;
  std::vector<std::string> given_, rest_, passed_, required_, pass_prefixes_;
  bool stop_at_positional_ = false, underscores_ = false;
};

// Throws UsageError "<flag> must be lo .. hi, got v" unless lo <= v <= hi (flag: "--epochs").
void check_range(const std::string& flag, int64_t v, int64_t lo, int64_t hi);

// The most threads any program starts for its kernels (its --threads, ENGINE_THREADS).
using engine::kMaxThreads;

// The items of a comma-separated flag value ("a,b,,c" -> a, b, "", c; "" -> one empty item).
std::vector<std::string> split_commas(const std::string& text);

}  // namespace engine::apps
