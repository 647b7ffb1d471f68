// tests/io/expect_error.h: runs f and expects an engine::Error whose message holds every part.
#pragma once
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "io/error.h"

namespace engine {

template <class F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error thrown; expected one containing '" << *parts.begin() << "'";
  } catch (const Error& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message '" << e.what() << "' lacks '" << p << "'";
  }
}

}  // namespace engine
