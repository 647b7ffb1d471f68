// core/error.h: the engine's typed errors and check macros. Library code throws; only apps/ exits.
// engine::Error, ENGINE_CHECK and ENGINE_FAIL come from io/error.h (the lowest layer throws them
// too); the error types that only core and above raise are here.
#pragma once
#include "io/error.h"

namespace engine {

// A wait that ran past its deadline. The message names who was waited for.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

}  // namespace engine
