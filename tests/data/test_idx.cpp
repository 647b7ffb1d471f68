// Tests data/idx.h: raw and gzipped IDX files written to a temp dir, and every kind of bad file.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "data/idx.h"
#include "tests/common/test_util.h"

namespace engine::data {
namespace {

namespace fs = std::filesystem;

class IdxTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return dir_.file(name); }
  void write_bytes(const std::string& p, const std::vector<uint8_t>& bytes) {
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
  }
  std::vector<uint8_t> read_bytes(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), {}};
  }
  // Expects read_idx(p) to throw an Error whose message holds p and every one of `parts`.
  void expect_error(const std::string& p, std::initializer_list<std::string> parts) {
    std::vector<std::string> all(parts);
    all.push_back(p);
    testing::expect_error([&] { read_idx(p); }, all);
  }
  testing::TempDir dir_;
};

std::vector<uint8_t> ramp(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 37 + 5);
  return v;
}

TEST_F(IdxTest, RawRoundTripAndHeaderBytes) {
  const std::vector<uint8_t> data = ramp(3 * 4 * 5);
  write_idx(path("a"), {3, 4, 5}, data, false);
  std::vector<uint8_t> bytes = read_bytes(path("a"));
  ASSERT_EQ(bytes.size(), 16u + 60u);
  EXPECT_EQ(std::vector<uint8_t>(bytes.begin(), bytes.begin() + 8),
            (std::vector<uint8_t>{0, 0, 0x08, 3, 0, 0, 0, 3}));  // big-endian dim 0
  IdxArray a = read_idx(path("a"));
  EXPECT_EQ(a.dims, (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(a.data, data);
}

TEST_F(IdxTest, BigEndianDims) {
  // dims 258 (0x00000102) and 1: a little-endian reader would see 0x02010000.
  std::vector<uint8_t> bytes = {0, 0, 8, 2, 0, 0, 1, 2, 0, 0, 0, 1};
  const std::vector<uint8_t> data = ramp(258);
  bytes.insert(bytes.end(), data.begin(), data.end());
  write_bytes(path("be"), bytes);
  IdxArray a = read_idx(path("be"));
  EXPECT_EQ(a.dims, (std::vector<int64_t>{258, 1}));
  EXPECT_EQ(a.data, data);
}

TEST_F(IdxTest, GzipRoundTripAndDetection) {
  const std::vector<uint8_t> data = ramp(1000);
  write_idx(path("b.gz"), {1000}, data, true);
  EXPECT_EQ(read_bytes(path("b.gz"))[0], 0x1f);
  EXPECT_EQ(read_idx(path("b.gz")).data, data);
  // Detected by magic bytes, whatever the name.
  fs::copy_file(path("b.gz"), path("b_no_suffix"));
  EXPECT_EQ(read_idx(path("b_no_suffix")).data, data);
}

TEST_F(IdxTest, ConcatenatedGzipMembers) {
  std::vector<uint8_t> raw = {0, 0, 8, 1, 0, 0, 0, 6, 10, 11, 12, 13, 14, 15};
  for (size_t cut : {size_t{5}, size_t{10}}) {
    const std::string p = path("multi" + std::to_string(cut) + ".gz");
    for (int part = 0; part < 2; ++part) {
      gzFile f = gzopen(p.c_str(), part == 0 ? "wb" : "ab");
      ASSERT_NE(f, nullptr);
      const uint8_t* from = raw.data() + (part == 0 ? 0 : cut);
      const unsigned len = static_cast<unsigned>(part == 0 ? cut : raw.size() - cut);
      ASSERT_EQ(gzwrite(f, from, len), static_cast<int>(len));
      ASSERT_EQ(gzclose(f), Z_OK);
    }
    EXPECT_EQ(read_idx(p).data, (std::vector<uint8_t>{10, 11, 12, 13, 14, 15}));
  }
}

TEST_F(IdxTest, MissingFile) {
  expect_error(path("nope-idx3-ubyte"), {"cannot open"});
}

TEST_F(IdxTest, WrongMagic) {
  write_bytes(path("m"), {0x01, 0x02, 0x08, 0x01, 0, 0, 0, 0});
  expect_error(path("m"), {"bad magic", "01 02"});
  write_bytes(path("short"), {0, 0});
  expect_error(path("short"), {"shorter than the 4-byte magic"});
}

TEST_F(IdxTest, UnsupportedDtypeNamesTheCode) {
  write_bytes(path("f"), {0, 0, 0x0D, 1, 0, 0, 0, 0});
  expect_error(path("f"), {"0x0D", "float32", "0x08 (uint8)"});
}

TEST_F(IdxTest, TruncatedData) {
  write_idx(path("t"), {3, 2, 2}, ramp(12), false);
  std::vector<uint8_t> bytes = read_bytes(path("t"));
  bytes.resize(16 + 5);
  write_bytes(path("t"), bytes);
  expect_error(path("t"), {"truncated: header says 3x2x2 = 12 bytes of data, file has 5"});
  write_bytes(path("h"), {0, 0, 8, 3, 0, 0, 0, 3, 0, 0});
  expect_error(path("h"), {"truncated", "needs 16 bytes"});
  // The same through gzip.
  write_idx(path("tz.gz"), {3, 2, 2}, ramp(12), false);
  std::vector<uint8_t> short_raw = read_bytes(path("tz.gz"));
  short_raw.resize(20);
  gzFile f = gzopen(path("tz.gz").c_str(), "wb");
  gzwrite(f, short_raw.data(), static_cast<unsigned>(short_raw.size()));
  gzclose(f);
  expect_error(path("tz.gz"), {"truncated", "= 12 bytes of data, file has 4"});
}

TEST_F(IdxTest, TrailingGarbageIsRejected) {
  write_idx(path("g"), {4}, ramp(4), false);
  std::vector<uint8_t> bytes = read_bytes(path("g"));
  bytes.push_back(0);
  bytes.push_back(0);
  write_bytes(path("g"), bytes);
  expect_error(path("g"), {"2 bytes of trailing garbage"});
}

TEST_F(IdxTest, CorruptGzip) {
  write_idx(path("c.gz"), {2000}, ramp(2000), true);
  const std::vector<uint8_t> good = read_bytes(path("c.gz"));
  // Flipped bits inside the deflate stream: zlib finds a bad block or a CRC mismatch.
  std::vector<uint8_t> bad = good;
  for (size_t i = 12; i < bad.size() - 8; i += 3) bad[i] ^= 0x5a;
  write_bytes(path("c.gz"), bad);
  expect_error(path("c.gz"), {"corrupt gzip"});
  // Cut in half: the stream ends early.
  write_bytes(path("half.gz"), std::vector<uint8_t>(good.begin(), good.begin() + good.size() / 2));
  expect_error(path("half.gz"), {"corrupt gzip", "ends early"});
  // Named .gz but raw.
  write_idx(path("raw.gz"), {4}, ramp(4), false);
  expect_error(path("raw.gz"), {"corrupt gzip", "1f 8b"});
  // Valid member followed by garbage.
  std::vector<uint8_t> tail = good;
  tail.insert(tail.end(), {1, 2, 3});
  write_bytes(path("tail.gz"), tail);
  expect_error(path("tail.gz"), {"corrupt gzip", "3 bytes of trailing garbage"});
}

TEST_F(IdxTest, WriteRejectsMismatchedData) {
  EXPECT_THROW(write_idx(path("w"), {2, 2}, ramp(3), false), Error);
  EXPECT_THROW(write_idx(path("w"), {}, {}, false), Error);
}

TEST(Idx, DtypeNames) {
  EXPECT_STREQ(idx_type_name(0x08), "uint8");
  EXPECT_STREQ(idx_type_name(0x0E), "float64");
  EXPECT_STREQ(idx_type_name(0x42), "unknown");
  EXPECT_EQ(dims_to_string({60000, 28, 28}), "60000x28x28");
}

}  // namespace
}  // namespace engine::data
