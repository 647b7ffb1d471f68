// fuzz/fuzz_util.h: what the fuzz targets share: a temp file holding the input (for readers that
// take a path), and the rule that engine::Error is the expected answer to bad bytes.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace engine::fuzz {

// A file in /tmp with the input's bytes; removed when it goes out of scope.
class TempInput {
 public:
  TempInput(const uint8_t* data, size_t size, const std::string& suffix)
      : path_("/tmp/engine_fuzz_" + std::to_string(::getpid()) + suffix) {
    FILE* f = std::fopen(path_.c_str(), "wb");
    if (!f) std::abort();
    if (size && std::fwrite(data, 1, size, f) != size) std::abort();
    std::fclose(f);
  }
  ~TempInput() { std::remove(path_.c_str()); }
  TempInput(const TempInput&) = delete;
  TempInput& operator=(const TempInput&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace engine::fuzz
