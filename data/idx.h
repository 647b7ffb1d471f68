// data/idx.h: the IDX file format (MNIST's): read raw or gzip-compressed files, write them (tests).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace engine::data {

// IDX dtype codes (third magic byte). Only IdxUint8 is supported by read_idx.
enum IdxType : uint8_t {
  IdxUint8 = 0x08,
  IdxInt8 = 0x09,
  IdxInt16 = 0x0B,
  IdxInt32 = 0x0C,
  IdxFloat32 = 0x0D,
  IdxFloat64 = 0x0E,
};

// "uint8", "int8", ..., or "unknown".
const char* idx_type_name(uint8_t code);

// An IDX array of uint8: dims as in the header (e.g. {60000, 28, 28}), data row-major.
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // product(dims) bytes
};

// The whole content of a file; gunzipped when it starts with the gzip magic 1f 8b (several gzip
// members are concatenated, as gunzip does). A name ending in ".gz" without that magic is an error.
// Throws engine::Error "<path>: <what is wrong>" for a missing/unreadable file or corrupt gzip.
std::vector<uint8_t> read_file_maybe_gz(const std::string& path);

// Parses an IDX file: bytes 0,1 zero; byte 2 the dtype (must be 0x08, uint8); byte 3 ndim (>= 1);
// ndim big-endian uint32 dims; then the data. Trailing bytes after the data are REJECTED (a file
// longer than its header says is not the file we think it is). Every problem throws engine::Error
// with one message naming the path, e.g. "<path>: truncated: header says 60000x28x28 = 47040000
// bytes of data, file has 1000".
IdxArray read_idx(const std::string& path);

// Writes a uint8 IDX file, gzip-compressed when gzip is true. Throws engine::Error on I/O failure.
void write_idx(const std::string& path, const std::vector<int64_t>& dims,
               const std::vector<uint8_t>& data, bool gzip);

// "60000x28x28".
std::string dims_to_string(const std::vector<int64_t>& dims);

}  // namespace engine::data
