// parallel/agreement.cpp: see agreement.h.
#include "parallel/agreement.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace engine::parallel {
namespace {

// 64-bit FNV-1a over 8-byte words (then the tail bytes): a fingerprint, not a defence.
uint64_t hash_bytes(const uint8_t* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  constexpr uint64_t kPrime = 0x100000001b3ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * kPrime;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * kPrime;
  return h ^ n;
}

std::string hex(uint64_t h) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// "train-images-idx3-ubyte" for ".../train-images-idx3-ubyte.gz": the same name on every rank.
std::string file_name(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  if (name.size() > 3 && name.ends_with(".gz")) name.resize(name.size() - 3);
  return name;
}

void add_split(const data::MnistSplit& s, std::vector<Setting>* out) {
  out->push_back({"the data: " + file_name(s.images_path),
                  detail::concat("(", s.count, " x ", s.rows, " x ", s.cols, " pixels, hash ",
                                 hex(hash_bytes(s.images.data(), s.images.size())), ")")});
  out->push_back({"the data: " + file_name(s.labels_path),
                  detail::concat("(", s.count, " labels, hash ",
                                 hex(hash_bytes(s.labels.data(), s.labels.size())), ")")});
}

// name \0 value \0, one after another.
std::string encode(const std::vector<Setting>& s) {
  std::string out;
  for (const Setting& x : s) {
    out += x.name;
    out.push_back('\0');
    out += x.value;
    out.push_back('\0');
  }
  return out;
}

std::vector<Setting> decode(const std::string& bytes) {
  std::vector<Setting> out;
  size_t pos = 0;
  auto field = [&] {
    const size_t end = bytes.find('\0', pos);
    ENGINE_CHECK(end != std::string::npos, "agreement: a rank's settings are cut short");
    std::string f = bytes.substr(pos, end - pos);
    pos = end + 1;
    return f;
  };
  while (pos < bytes.size()) {
    Setting s;
    s.name = field();
    s.value = field();
    out.push_back(std::move(s));
  }
  return out;
}

// What a value looks like in the message ("" would vanish).
std::string shown(const std::string& v) {
  return v.empty() ? "\"\"" : v;
}

}  // namespace

std::vector<Setting> data_settings(const data::Mnist& m) {
  std::vector<Setting> out;
  add_split(m.train, &out);
  add_split(m.test, &out);
  return out;
}

std::string first_disagreement(const std::vector<std::vector<Setting>>& all) {
  if (all.empty()) return "";
  const std::vector<Setting>& first = all[0];
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r].size() != first.size())
      return detail::concat("ranks disagree on the settings themselves: ", first.size(),
                            " on rank 0, ", all[r].size(), " on rank ", r,
                            " (different builds of train?)");
  for (size_t i = 0; i < first.size(); ++i)
    for (size_t r = 1; r < all.size(); ++r) {
      const Setting& s = all[r][i];
      if (s.name != first[i].name)
        return detail::concat("ranks disagree on the settings themselves: ", first[i].name,
                              " on rank 0, ", s.name, " on rank ", r,
                              " (different builds of train?)");
      if (s.value != first[i].value)
        return detail::concat("ranks disagree on ", s.name, ": ", shown(first[i].value),
                              " on rank 0, ", shown(s.value), " on rank ", r);
    }
  return "";
}

void agree(comm::Communicator& comm, const std::vector<Setting>& mine) {
  const std::string bytes = encode(mine);
  const int world = comm.size();
  int64_t len = static_cast<int64_t>(bytes.size());
  std::vector<int64_t> lens(world);
  comm.all_gather(&len, lens.data(), 1, DType::I64);
  const int64_t longest = *std::max_element(lens.begin(), lens.end());
  std::string padded = bytes;
  padded.resize(static_cast<size_t>(longest), '\0');
  std::string all(static_cast<size_t>(longest) * world, '\0');
  comm.all_gather(padded.data(), all.data(), static_cast<size_t>(longest), DType::U8);
  std::vector<std::vector<Setting>> settings;
  for (int r = 0; r < world; ++r)
    settings.push_back(
        decode(all.substr(static_cast<size_t>(longest) * r, static_cast<size_t>(lens[r]))));
  const std::string diff = first_disagreement(settings);
  ENGINE_CHECK(diff.empty(), diff);
}

}  // namespace engine::parallel
