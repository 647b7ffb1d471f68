// comm/rendezvous/file_store.h: a Store kept in a directory on a filesystem every rank sees
// (file:///path). One file per key (name = the key in hex), written to a temporary name and
// renamed, so readers never see half a value; add() holds an flock on <dir>/.lock. Waiters poll
// with backoff (1-20 ms). The directory must be empty or absent when a job starts: keys of an
// earlier job would be read as this job's.
#pragma once
#include "comm/base/store.h"

namespace engine::comm {

class FileStore : public Store {
 public:
  // Creates the directory if absent.
  explicit FileStore(std::string dir, Millis timeout = Millis(300000));
  using Store::wait;
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  std::string describe() const override { return "file://" + dir_; }

 private:
  std::string path_of(const std::string& key) const;
  bool read_key(const std::string& key, std::string* value) const;
  std::string dir_;
};

}  // namespace engine::comm
