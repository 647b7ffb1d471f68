// tests/data/test_idx_bomb.cpp: a gzip file that inflates to 1 GiB behind an IDX header that
// announces 10x28x28 is refused after inflating what the header announces, not all of it: the
// reading process's peak resident memory stays small.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/idx.h"
#include "tests/common/proc_status.h"
#include "tests/common/temp_dir.h"

namespace engine::data {
namespace {

// One gzip member holding `data`, compressed at level 9 (zeros shrink about 1000 times).
std::string gzip_member(const std::vector<uint8_t>& data) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&zs, data.size()), '\0');
  zs.next_in = const_cast<Bytef*>(data.data());
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// An IDX header of 10x28x28 uint8, then 1 GiB of zeros, as 64 gzip members of 16 MiB each
// (concatenated members inflate to the concatenation, as gunzip reads them): about 1 MB on disk.
void write_bomb(const std::string& path) {
  constexpr size_t kPiece = 16u << 20;
  std::vector<uint8_t> first(kPiece, 0);
  const uint8_t header[16] = {0, 0, 0x08, 3, 0, 0, 0, 10, 0, 0, 0, 28, 0, 0, 0, 28};
  std::copy(header, header + 16, first.begin());
  const std::string head = gzip_member(first);
  const std::string zeros = gzip_member(std::vector<uint8_t>(kPiece, 0));
  std::ofstream f(path, std::ios::binary);
  f << head;
  for (int i = 1; i < 64; ++i) f << zeros;
}

TEST(IdxBomb, GzipInflationIsCappedByTheHeader) {
  const testing::TempDir dir;
  const std::string path = dir.file("train-images-idx3-ubyte.gz");
  write_bomb(path);
  // read_idx in a child, which measures its own peak resident memory while reading (VmHWM,
  // reset through /proc/self/clear_refs, less the resident memory before).
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    std::ofstream("/proc/self/clear_refs") << "5";
    const long before = testing::proc_status_kb("VmRSS");
    std::string msg = "no error";
    try {
      read_idx(path);
    } catch (const Error& e) {
      msg = e.what();
    }
    msg = std::to_string((testing::proc_status_kb("VmHWM") - before) / 1024) + " " + msg;
    (void)!write(fds[1], msg.data(), msg.size());
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) msg.append(buf, n);
  close(fds[0]);
  ASSERT_EQ(waitpid(pid, nullptr, 0), pid);
  const size_t space = msg.find(' ');
  ASSERT_NE(space, std::string::npos) << msg;
  const long grown_mb = std::stol(msg.substr(0, space));
  msg = msg.substr(space + 1);
  EXPECT_EQ(msg, path +
                     ": gzip inflates past the 7856 bytes its IDX header announces; refused "
                     "without inflating the rest");
  std::printf("[message] %s\n[peak RSS growth of the reader] %ld MB\n", msg.c_str(), grown_mb);
  EXPECT_LT(grown_mb, 64) << "the reader inflated far more than the header announced";
}

}  // namespace
}  // namespace engine::data
