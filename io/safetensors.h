// io/safetensors.h: safetensors checkpoint files, read and write, at the level of named byte
// buffers (no Tensor dependency). Layout: u64 little-endian header length N, N bytes of JSON
// header (padded with spaces to a multiple of 8), then the tensors' bytes back to back.
// Spec and what we support: third_party_notes/safetensors.md.
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "io/dtype.h"
#include "io/error.h"

namespace engine {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

// One tensor: name (PyTorch state_dict key), dtype, shape ([] is a 0-d scalar; a 0 dimension
// makes an empty tensor) and its row-major little-endian bytes, numel * dtype_size long.
struct StEntry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::string bytes;

  int64_t numel() const;
};

struct StFile {
  std::map<std::string, std::string> metadata;         // the header's "__metadata__", if any
  std::vector<StEntry> entries;                        // in header order
  const StEntry* find(const std::string& name) const;  // nullptr when absent
};

// Serialises entries in the order given (the byte buffer follows that order). Throws
// engine::Error naming the tensor for a duplicate or reserved name, a negative dimension or a
// byte count that does not match shape and dtype.
std::string encode_safetensors(const std::vector<StEntry>& entries,
                               const std::map<std::string, std::string>& metadata = {});

// Parses and validates a whole file image. Every error names `source` and the tensor or field.
StFile decode_safetensors(std::string_view file, const std::string& source = "<memory>");

// encode_safetensors + write_file_atomic: a failed or interrupted save leaves the old file whole.
void save_safetensors(const std::string& path, const std::vector<StEntry>& entries,
                      const std::map<std::string, std::string>& metadata = {});

// read_file + decode_safetensors.
StFile load_safetensors(const std::string& path);

// Typed helpers: build an entry from values, read values back (checks the dtype).
template <class T>
StEntry st_entry(std::string name, std::vector<int64_t> shape, const std::vector<T>& values) {
  StEntry e{std::move(name), dtype_of<T>(), std::move(shape), {}};
  e.bytes.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
  return e;
}

template <class T>
std::vector<T> st_values(const StEntry& e) {
  ENGINE_CHECK(e.dtype == dtype_of<T>(), "safetensors tensor '", e.name, "' holds ",
               dtype_name(e.dtype), ", not ", dtype_name(dtype_of<T>()));
  std::vector<T> out(e.bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), e.bytes.data(), out.size() * sizeof(T));
  return out;
}

}  // namespace engine
