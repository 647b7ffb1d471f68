// apps/program.cpp: see program.h.
#include "apps/program.h"

#include <cstdio>
#include <exception>
#include <string>

#include "comm/backends/mpi/mpi_world.h"
#include "io/torchelastic_error.h"

namespace engine::apps {
namespace {

// The message on one line: a newline inside it would make two.
std::string one_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

int report(const char* name, const std::string& message, int code) {
  std::fflush(stdout);  // what the program printed comes before why it stopped
  std::fprintf(stderr, "%s: %s\n", name, one_line(message).c_str());
  write_torchelastic_error_file(std::string(name) + ": " + one_line(message));  // under torchrun
  return code;
}

}  // namespace

int run_program(const char* name, int argc, char** argv,
                const std::function<int(int argc, char** argv)>& body) {
  try {
    const int code = body(argc, argv);
    // A clean exit ends MPI here; any other leaves it to MPI_Abort at exit
    // (comm/backends/mpi/mpi_world.h).
    if (code == 0) comm::mpi_finalize();
    return code;
  } catch (const UsageError& e) {
    return report(name, std::string(e.what()) + " (run '" + name + " --help' for usage)", 2);
  } catch (const std::exception& e) {
    return report(name, e.what(), 1);
  } catch (...) {
    return report(name, "stopped by an exception that is not a std::exception", 1);
  }
}

void as_usage_error(const std::function<void()>& check) {
  try {
    check();
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

}  // namespace engine::apps
