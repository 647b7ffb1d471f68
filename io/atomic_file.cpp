// io/atomic_file.cpp: POSIX implementation of whole-file reads and atomic writes.
#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <system_error>

#include "io/error.h"

namespace engine {

namespace {

std::string reason(int err) {
  return std::system_category().message(err);
}

// The directory holding `path`, for the fsync that makes the rename durable.
std::string parent_dir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Closes the descriptor and removes the temporary file unless released: every early exit,
// exception included, cleans up after itself.
struct TempFile {
  std::string path;
  int fd = -1;
  bool keep = false;
  ~TempFile() {
    if (fd >= 0) ::close(fd);
    if (!keep) ::unlink(path.c_str());
  }
};

}  // namespace

void write_file_atomic(const std::string& path, std::string_view bytes) {
  ENGINE_CHECK(!path.empty(), "write_file_atomic: empty path");
  // pid + counter: distinct per process and per concurrent writer thread.
  static std::atomic<uint64_t> counter{0};
  std::string tmp_path =
      path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));

  // No O_EXCL: a stale temporary left by a crashed run with the same pid is overwritten, not a
  // reason to fail forever. O_NOFOLLOW: never truncate through a planted link.
  int fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0) {
    int err = errno;
    ENGINE_FAIL("cannot write '", path, "': cannot create temporary file '", tmp_path,
                "': ", reason(err));
  }
  TempFile tmp{tmp_path, fd};

  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ENGINE_FAIL("cannot write '", path, "': writing ", bytes.size(), " bytes to '", tmp_path,
                  "' failed after ", bytes.size() - left, ": ", reason(err));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ENGINE_FAIL("cannot write '", path, "': fsync of '", tmp_path, "' failed: ", reason(err));
  }
  tmp.fd = -1;
  if (::close(fd) != 0) {
    int err = errno;
    ENGINE_FAIL("cannot write '", path, "': close of '", tmp_path, "' failed: ", reason(err));
  }
  if (::rename(tmp_path.c_str(), path.c_str()) != 0) {
    int err = errno;
    ENGINE_FAIL("cannot write '", path, "': rename from '", tmp_path, "' failed: ", reason(err));
  }
  tmp.keep = true;  // it is `path` now

  // Make the rename itself durable. Some filesystems cannot fsync a directory (EINVAL): the
  // data is written and renamed, so that is not an error.
  std::string dir = parent_dir(path);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    int err = errno;
    ENGINE_FAIL("wrote '", path, "' but cannot open its directory '", dir,
                "' to sync it: ", reason(err));
  }
  int rc = ::fsync(dfd);
  int err = errno;
  ::close(dfd);
  ENGINE_CHECK(rc == 0 || err == EINVAL, "wrote '", path, "' but fsync of its directory '", dir,
               "' failed: ", reason(err));
}

std::string read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    ENGINE_FAIL("cannot read '", path, "': ", reason(err));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};

  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ENGINE_FAIL("cannot read '", path, "': fstat failed: ", reason(err));
  }
  ENGINE_CHECK(!S_ISDIR(st.st_mode), "cannot read '", path, "': it is a directory");

  std::string out;
  if (S_ISREG(st.st_mode)) out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ENGINE_FAIL("cannot read '", path, "' after ", out.size(), " bytes: ", reason(err));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace engine
