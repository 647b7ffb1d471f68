// io/error.h: the engine's error type and check macros. They live in the lowest layer so that
// every layer, io's file formats included, throws the same engine::Error; core/error.h adds the
// rest of the error types. Library code throws; only apps/ exits.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace engine {

// Any error the engine reports to a user: bad input, bad file, misuse of an API.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace engine

// ENGINE_CHECK(cond, "message parts", value, ...): throws engine::Error with the parts joined.
#define ENGINE_CHECK(cond, ...)                                                \
  do {                                                                         \
    if (!(cond)) throw ::engine::Error(::engine::detail::concat(__VA_ARGS__)); \
  } while (0)

#define ENGINE_FAIL(...) throw ::engine::Error(::engine::detail::concat(__VA_ARGS__))
