// fuzz/fuzz_idx.cpp: the IDX reader on any bytes, raw or gzip (data/idx.h). Every input must end in
// a parsed array or an engine::Error; the gzip path must not inflate past what the header
// announces (libFuzzer's -rss_limit_mb catches a reader that does).
#include <cstdint>

#include "data/idx.h"
#include "fuzz/fuzz_util.h"
#include "io/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A name ending in .gz with no gzip magic is an error of its own: try both names.
  const bool gz = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
  engine::fuzz::TempInput in(data, size, gz ? "-images.gz" : "-images");
  try {
    engine::data::IdxArray a = engine::data::read_idx(in.path());
    size_t n = 1;
    for (int64_t d : a.dims) n *= static_cast<size_t>(d);
    if (n != a.data.size()) __builtin_trap();  // the header's count is the data's
  } catch (const engine::Error&) {
  }
  return 0;
}
