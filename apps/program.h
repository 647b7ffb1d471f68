// apps/program.h: every program's main() in one shape. The program's body parses its flags and
// runs; what it throws becomes one line on stderr and an exit code:
//   0  done, or --help / -h (usage printed on stdout by Flags::parse)
//   1  a runtime error: "<program>: <what failed>"
//   2  a usage error (UsageError: unknown flag, bad or missing value, bad combination of flags):
//      "<program>: <message> (run '<program> --help' for usage)"
// The body may return any other code it documents (launch: the failed rank's). Nothing escapes
// as an abort or a stack trace. Under torchrun the error also goes to torchelastic's error file
// (io/torchelastic_error.h), so that torchrun's summary names the rank that failed first.
#pragma once
#include <functional>

#include "apps/flags.h"

namespace engine::apps {

int run_program(const char* name, int argc, char** argv,
                const std::function<int(int argc, char** argv)>& body);

// Runs check() (library code that validates a configuration and throws engine::Error) and turns
// its error into a UsageError: a bad combination of flags is the caller's mistake.
void as_usage_error(const std::function<void()>& check);

}  // namespace engine::apps
