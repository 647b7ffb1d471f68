// tests/common/run.h: run a shell command line and read back its exit code and output, the way
// the process-level tests run the built programs.
#pragma once
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace engine::testing {

struct RunResult {
  int code = -1;       // the exit code; 128 + signal if it was killed
  std::string output;  // stdout and stderr together
};

// Runs `cmd` under /bin/sh with stderr joined to stdout.
inline RunResult run(const std::string& cmd) {
  RunResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

}  // namespace engine::testing
