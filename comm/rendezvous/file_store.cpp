// comm/rendezvous/file_store.cpp: see file_store.h.
#include "comm/rendezvous/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <sstream>
#include <thread>

#include "comm/transport/socket.h"
#include "core/error.h"

namespace engine::comm {

FileStore::FileStore(std::string dir, Millis timeout) : Store(timeout), dir_(std::move(dir)) {
  ENGINE_CHECK(!dir_.empty(), "file store: empty path");
  if (mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST)
    ENGINE_FAIL("file store: cannot create directory ", dir_, ": ", errno_str(errno));
  struct stat st {};
  ENGINE_CHECK(stat(dir_.c_str(), &st) == 0 && S_ISDIR(st.st_mode), "file store: ", dir_,
               " is not a directory (file:// names a directory that holds one file per key)");
}

std::string FileStore::path_of(const std::string& key) const {
  static const char* hex = "0123456789abcdef";
  std::string name = "k";
  for (unsigned char c : key) {
    name += hex[c >> 4];
    name += hex[c & 15];
  }
  return dir_ + "/" + name;
}

bool FileStore::read_key(const std::string& key, std::string* value) const {
  std::ifstream f(path_of(key), std::ios::binary);
  if (!f) return false;
  std::ostringstream os;
  os << f.rdbuf();
  *value = os.str();
  return true;
}

void FileStore::set(const std::string& key, const std::string& value) {
  static std::atomic<uint64_t> counter{0};
  std::string tmp = dir_ + "/.tmp." + std::to_string(getpid()) + "." + std::to_string(counter++);
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(value.data(), static_cast<std::streamsize>(value.size()));
    ENGINE_CHECK(f.good(), "file store ", dir_, ": cannot write ", tmp);
  }
  if (rename(tmp.c_str(), path_of(key).c_str()) != 0)
    ENGINE_FAIL("file store ", dir_, ": rename failed: ", errno_str(errno));
}

std::string FileStore::get(const std::string& key) {
  wait({key}, timeout());
  std::string v;
  ENGINE_CHECK(read_key(key, &v), "file store ", dir_, ": key '", key, "' vanished");
  return v;
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  std::string lock_path = dir_ + "/.lock";
  int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) ENGINE_FAIL("file store ", dir_, ": cannot open ", lock_path, ": ", errno_str(errno));
  if (flock(fd, LOCK_EX) != 0) {
    int err = errno;
    close(fd);
    ENGINE_FAIL("file store ", dir_, ": flock failed: ", errno_str(err));
  }
  int64_t v = delta;
  try {
    std::string old;
    if (read_key(key, &old)) v += std::stoll(old);
    set(key, std::to_string(v));
  } catch (...) {
    flock(fd, LOCK_UN);
    close(fd);
    throw;
  }
  flock(fd, LOCK_UN);
  close(fd);
  return v;
}

bool FileStore::check(const std::vector<std::string>& keys) {
  for (auto& k : keys)
    if (access(path_of(k).c_str(), F_OK) != 0) return false;
  return true;
}

void FileStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  Deadline deadline = Deadline::after(timeout);
  int sleep_ms = 1;
  while (!check(keys)) {
    if (deadline.expired()) {
      std::vector<std::string> missing;
      for (auto& k : keys)
        if (!check({k})) missing.push_back(k);
      throw TimeoutError(timeout_message(missing, timeout));
    }
    std::this_thread::sleep_for(Millis(std::min<long long>(sleep_ms, deadline.poll_ms())));
    sleep_ms = std::min(sleep_ms * 2, 20);
  }
}

}  // namespace engine::comm
