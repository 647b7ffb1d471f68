// tests/common/expect_error.h: runs f and expects an engine::Error whose message holds every part.
// Needs only io/error.h (tests/io, below core, use it too).
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/error.h"

namespace engine::testing {

template <class F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error thrown; expected one containing '"
                  << (parts.empty() ? "" : parts.front()) << "'";
  } catch (const Error& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message '" << e.what() << "' lacks '" << p << "'";
  }
}

}  // namespace engine::testing
