// data/idx.cpp: IDX parsing and gzip inflation through zlib.
#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include "core/error.h"

namespace engine::data {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool has_gzip_magic(const std::vector<uint8_t>& bytes, size_t at = 0) {
  return bytes.size() >= at + 2 && bytes[at] == 0x1f && bytes[at + 1] == 0x8b;
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

std::vector<uint8_t> read_raw(const std::string& path) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) ENGINE_FAIL(path, ": cannot open: ", std::strerror(errno));
  std::vector<uint8_t> bytes;
  uint8_t buf[1 << 16];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof(buf), f.get())) > 0)
    bytes.insert(bytes.end(), buf, buf + got);
  if (std::ferror(f.get())) ENGINE_FAIL(path, ": read error: ", std::strerror(errno));
  return bytes;
}

// Inflates every gzip member of `in` (concatenated members decode to the concatenation), but
// never more than `cap` bytes: it stops there, and the caller sees the output reach the cap.
std::vector<uint8_t> gunzip(const std::string& path, const std::vector<uint8_t>& in, size_t cap) {
  // The last 4 bytes (ISIZE) are the uncompressed size mod 2^32: a good first guess.
  size_t guess = in.size() * 4;
  if (in.size() >= 18) {
    const uint8_t* t = in.data() + in.size() - 4;
    size_t isize = t[0] | (t[1] << 8) | (t[2] << 16) | (static_cast<size_t>(t[3]) << 24);
    if (isize <= in.size() * 1100) guess = std::max(guess / 4, isize);  // deflate ratio <= 1032
  }
  std::vector<uint8_t> out(std::min(std::max<size_t>(guess, 1024), cap));
  size_t produced = 0, consumed = 0;
  constexpr size_t kMaxChunk = 1u << 30;  // avail_in/avail_out are 32-bit

  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) ENGINE_FAIL(path, ": zlib inflateInit2 failed");
  struct End {
    z_stream* zs;
    ~End() { inflateEnd(zs); }
  } end{&zs};

  while (produced < cap) {
    if (produced == out.size()) out.resize(std::min(out.size() * 2, cap));
    size_t in_chunk = std::min(in.size() - consumed, kMaxChunk);
    size_t out_chunk = std::min(out.size() - produced, kMaxChunk);
    zs.next_in = const_cast<Bytef*>(in.data() + consumed);
    zs.avail_in = static_cast<uInt>(in_chunk);
    zs.next_out = out.data() + produced;
    zs.avail_out = static_cast<uInt>(out_chunk);
    int rc = inflate(&zs, Z_NO_FLUSH);
    consumed += in_chunk - zs.avail_in;
    produced += out_chunk - zs.avail_out;
    if (rc == Z_STREAM_END) {
      if (consumed == in.size()) break;
      if (!has_gzip_magic(in, consumed)) {
        ENGINE_FAIL(path, ": corrupt gzip: ", in.size() - consumed,
                    " bytes of trailing garbage after the compressed data");
      }
      inflateReset(&zs);  // next gzip member
      continue;
    }
    if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT || rc == Z_STREAM_ERROR) {
      ENGINE_FAIL(path, ": corrupt gzip: ", zs.msg ? zs.msg : "invalid data",
                  " (at compressed byte ", consumed, " of ", in.size(), ")");
    }
    if (rc == Z_MEM_ERROR) ENGINE_FAIL(path, ": zlib ran out of memory inflating");
    // Z_OK or Z_BUF_ERROR: progress is possible only with more input or more output room.
    if (consumed == in.size() && zs.avail_out > 0) {
      ENGINE_FAIL(path, ": corrupt gzip: compressed data ends early after ", in.size(),
                  " bytes (truncated .gz file?)");
    }
    if (in_chunk == zs.avail_in && out_chunk == zs.avail_out && zs.avail_out > 0) {
      ENGINE_FAIL(path, ": corrupt gzip: zlib made no progress at compressed byte ", consumed);
    }
  }
  out.resize(produced);
  return out;
}

uint32_t read_be32(const uint8_t* p) {
  return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) |
         (static_cast<uint32_t>(p[2]) << 8) | static_cast<uint32_t>(p[3]);
}

}  // namespace

const char* idx_type_name(uint8_t code) {
  switch (code) {
    case IdxUint8:
      return "uint8";
    case IdxInt8:
      return "int8";
    case IdxInt16:
      return "int16";
    case IdxInt32:
      return "int32";
    case IdxFloat32:
      return "float32";
    case IdxFloat64:
      return "float64";
    default:
      return "unknown";
  }
}

std::string dims_to_string(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) s += 'x';
    s += std::to_string(dims[i]);
  }
  return s;
}

std::vector<uint8_t> read_file_maybe_gz(const std::string& path) {
  std::vector<uint8_t> bytes = read_raw(path);
  if (has_gzip_magic(bytes)) return gunzip(path, bytes, std::numeric_limits<size_t>::max());
  if (ends_with(path, ".gz")) {
    ENGINE_FAIL(path, ": corrupt gzip: named .gz but does not start with the gzip magic 1f 8b");
  }
  return bytes;
}

namespace {

// The bytes an IDX file's header announces (header and data), or 0 when `head` (the file's first
// bytes) is no IDX header of uint8 data: read_idx's checks then say what is wrong.
uint64_t announced_size(const std::vector<uint8_t>& head) {
  if (head.size() < 4 || head[0] != 0 || head[1] != 0 || head[2] != IdxUint8 || head[3] == 0)
    return 0;
  const size_t header = 4 + 4 * static_cast<size_t>(head[3]);
  if (head.size() < header) return 0;
  uint64_t count = 1;
  for (size_t d = 0; d < head[3]; ++d) {
    const uint64_t dim = read_be32(head.data() + 4 + 4 * d);
    if (dim != 0 && count > (std::numeric_limits<uint64_t>::max() >> 1) / dim) return 0;
    count *= dim;
  }
  return header + count;
}

// A gzip-compressed IDX file, inflated no further than its header announces (plus one byte, to
// tell a longer stream): a gzip bomb is refused after at most that much.
std::vector<uint8_t> gunzip_idx(const std::string& path, const std::vector<uint8_t>& gz) {
  const std::vector<uint8_t> head = gunzip(path, gz, 4 + 4 * 255);
  const uint64_t want = announced_size(head);
  if (want == 0) return head;
  std::vector<uint8_t> bytes = gunzip(path, gz, want + 1);
  if (bytes.size() > want) {
    ENGINE_FAIL(path, ": gzip inflates past the ", want,
                " bytes its IDX header announces; refused without inflating the rest");
  }
  return bytes;
}

}  // namespace

IdxArray read_idx(const std::string& path) {
  std::vector<uint8_t> raw = read_raw(path);
  if (!has_gzip_magic(raw) && ends_with(path, ".gz")) {
    ENGINE_FAIL(path, ": corrupt gzip: named .gz but does not start with the gzip magic 1f 8b");
  }
  std::vector<uint8_t> bytes = has_gzip_magic(raw) ? gunzip_idx(path, raw) : std::move(raw);
  const size_t n = bytes.size();
  if (n < 4) ENGINE_FAIL(path, ": not an IDX file: ", n, " bytes, shorter than the 4-byte magic");
  if (bytes[0] != 0 || bytes[1] != 0) {
    char hex[16];
    std::snprintf(hex, sizeof(hex), "%02x %02x", bytes[0], bytes[1]);
    ENGINE_FAIL(path, ": not an IDX file: bad magic, first two bytes are ", hex,
                " (expected 00 00)");
  }
  const uint8_t type = bytes[2];
  if (type != IdxUint8) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "0x%02X", type);
    ENGINE_FAIL(path, ": unsupported IDX dtype code ", hex, " (", idx_type_name(type),
                "); only 0x08 (uint8) is supported");
  }
  const int ndim = bytes[3];
  if (ndim == 0) ENGINE_FAIL(path, ": bad IDX header: ndim is 0");
  const size_t header = 4 + 4 * static_cast<size_t>(ndim);
  if (n < header) {
    ENGINE_FAIL(path, ": truncated: header of ", ndim, " dims needs ", header, " bytes, file has ",
                n);
  }
  IdxArray a;
  int64_t count = 1;
  for (int d = 0; d < ndim; ++d) {
    int64_t dim = read_be32(bytes.data() + 4 + 4 * d);
    a.dims.push_back(dim);
    if (dim != 0 && count > std::numeric_limits<int64_t>::max() / dim) {
      ENGINE_FAIL(path, ": bad IDX header: dims ", dims_to_string(a.dims), "... overflow int64");
    }
    count *= dim;
  }
  const size_t have = n - header;
  if (have < static_cast<uint64_t>(count)) {
    ENGINE_FAIL(path, ": truncated: header says ", dims_to_string(a.dims), " = ", count,
                " bytes of data, file has ", have);
  }
  if (have > static_cast<uint64_t>(count)) {
    ENGINE_FAIL(path, ": ", have - count, " bytes of trailing garbage: header says ",
                dims_to_string(a.dims), " = ", count, " bytes of data, file has ", have);
  }
  a.data.assign(bytes.begin() + header, bytes.end());
  return a;
}

void write_idx(const std::string& path, const std::vector<int64_t>& dims,
               const std::vector<uint8_t>& data, bool gzip) {
  ENGINE_CHECK(!dims.empty() && dims.size() < 256, path, ": write_idx: ndim must be 1..255, got ",
               dims.size());
  int64_t count = 1;
  std::vector<uint8_t> bytes = {0, 0, IdxUint8, static_cast<uint8_t>(dims.size())};
  for (int64_t d : dims) {
    ENGINE_CHECK(d >= 0 && d <= 0xFFFFFFFFll, path, ": write_idx: dim ", d, " out of range");
    count *= d;
    for (int s = 24; s >= 0; s -= 8) bytes.push_back(static_cast<uint8_t>(d >> s));
  }
  ENGINE_CHECK(static_cast<size_t>(count) == data.size(), path, ": write_idx: dims ",
               dims_to_string(dims), " = ", count, " elements but data has ", data.size());
  bytes.insert(bytes.end(), data.begin(), data.end());
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    if (!f) ENGINE_FAIL(path, ": cannot open for writing: ", std::strerror(errno));
    size_t done = 0;
    bool ok = true;
    while (ok && done < bytes.size()) {
      unsigned chunk = static_cast<unsigned>(std::min<size_t>(bytes.size() - done, 1u << 30));
      ok = gzwrite(f, bytes.data() + done, chunk) == static_cast<int>(chunk);
      done += chunk;
    }
    if (gzclose(f) != Z_OK || !ok) ENGINE_FAIL(path, ": gzip write failed");
    return;
  }
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "wb"));
  if (!f) ENGINE_FAIL(path, ": cannot open for writing: ", std::strerror(errno));
  if (std::fwrite(bytes.data(), 1, bytes.size(), f.get()) != bytes.size()) {
    ENGINE_FAIL(path, ": write failed: ", std::strerror(errno));
  }
  if (std::fclose(f.release()) != 0) ENGINE_FAIL(path, ": close failed: ", std::strerror(errno));
}

}  // namespace engine::data
