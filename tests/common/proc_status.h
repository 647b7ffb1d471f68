// tests/common/proc_status.h: a field of /proc/<pid>/status (VmRSS, VmHWM, ...), for the tests
// that bound a process's resident memory.
#pragma once
#include <fstream>
#include <string>

namespace engine::testing {

// The field's value in kB; -1 when the process or the field is not there.
inline long proc_status_kb(const std::string& field, const std::string& pid = "self") {
  std::ifstream f("/proc/" + pid + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  return -1;
}

}  // namespace engine::testing
