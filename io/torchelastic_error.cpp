// io/torchelastic_error.cpp: see torchelastic_error.h.
#include "io/torchelastic_error.h"

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <thread>

#include "io/atomic_file.h"

namespace engine {

constexpr std::chrono::milliseconds kDerivedFailureGrace{500};

Json torchelastic_error(const std::string& message, int64_t unix_seconds) {
  Json extra = {{"py_callstack", message}, {"timestamp", std::to_string(unix_seconds)}};
  return Json{{"message", Json{{"message", message}, {"extraInfo", extra}}}};
}

bool names_another_rank(const std::string& message, int rank) {
  std::string m = message;
  for (char& c : m) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (size_t at = m.find("rank"); at != std::string::npos; at = m.find("rank", at + 4)) {
    if (at > 0 && std::isalpha(static_cast<unsigned char>(m[at - 1]))) continue;
    if (at >= 6 && m.compare(at - 6, 6, "local ") == 0) continue;
    size_t i = at + 4;
    if (i < m.size() && m[i] == 's') ++i;
    while (i < m.size() && (m[i] == ' ' || m[i] == '[')) ++i;
    // One number, or a list "1, 3".
    while (i < m.size() && std::isdigit(static_cast<unsigned char>(m[i]))) {
      long n = 0;
      while (i < m.size() && std::isdigit(static_cast<unsigned char>(m[i])) && n < 1000000)
        n = n * 10 + (m[i++] - '0');
      if (n != rank) return true;
      while (i < m.size() && (m[i] == ',' || m[i] == ' ')) ++i;
    }
  }
  return false;
}

void write_torchelastic_error_file(const std::string& message) {
  const char* path = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (!path || !*path) return;
  const char* rank_env = std::getenv("RANK");
  const int rank = rank_env ? std::atoi(rank_env) : -1;
  const bool derived = names_another_rank(message, rank);
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  try {
    write_file_atomic(path, dump_json(torchelastic_error(message, now + (derived ? 1 : 0))));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cannot write torchelastic's error file: %s\n", e.what());
  }
  // torchrun counts as failed only the ranks it finds exited; one still running when it looks is
  // stopped with SIGTERM and left out of the summary. A rank that fails because another failed
  // learns of it within milliseconds, often before that rank has exited: it leaves a moment later,
  // so that the rank that failed first is among the failures torchrun sees.
  if (derived) std::this_thread::sleep_for(kDerivedFailureGrace);
}

}  // namespace engine
