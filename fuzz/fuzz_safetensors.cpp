// fuzz/fuzz_safetensors.cpp: the safetensors decoder (io/safetensors.h) on any bytes; a decoded
// file re-encodes to a file that decodes to the same entries.
#include <cstdint>
#include <string_view>

#include "io/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    engine::StFile f = engine::decode_safetensors(bytes, "<fuzz>");
    engine::StFile g =
        engine::decode_safetensors(engine::encode_safetensors(f.entries, f.metadata));
    if (g.entries.size() != f.entries.size()) __builtin_trap();
  } catch (const engine::Error&) {
  }
  return 0;
}
