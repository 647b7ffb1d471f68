// tests/common/scoped_env.h: sets (or unsets) one environment variable for a scope and restores it,
// for tests of what the process's environment forces (core/knobs.h).
#pragma once
#include <cstdlib>
#include <optional>
#include <string>

namespace engine::test_env {

class ScopedEnv {
 public:
  // value nullptr: unset for the scope.
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_.c_str(), old_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace engine::test_env
