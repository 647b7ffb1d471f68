// tests/apps/train_fixture.h: a small learnable MNIST-format dataset written as IDX files, a
// folder per test that holds it, and ways to compare the checkpoints the programs wrote (the
// programs run through tests/common/run.h).
#pragma once
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/rng.h"
#include "data/idx.h"
#include "io/safetensors.h"
#include "tests/common/run.h"
#include "tests/common/temp_dir.h"

namespace engine::testing {

namespace fs = std::filesystem;

inline const std::string kBuild = ENGINE_BUILD_DIR;
inline const std::string kTrain = kBuild + "/apps/train";
inline const std::string kLaunchBin = kBuild + "/apps/launch";

// n images of 28x28: class k lights up a 6x6 block at a position of its own, plus noise.
inline void write_dataset(const std::string& dir, int64_t n_train, int64_t n_test) {
  fs::create_directories(dir);
  Generator g(42);
  auto make = [&](const std::string& prefix, int64_t n, bool gz) {
    std::vector<uint8_t> img(n * 784), lab(n);
    for (int64_t i = 0; i < n; ++i) {
      int k = static_cast<int>(g.uniform() * 10) % 10;
      lab[i] = static_cast<uint8_t>(k);
      for (int p = 0; p < 784; ++p) img[i * 784 + p] = static_cast<uint8_t>(g.uniform() * 60);
      int r0 = 2 + (k / 5) * 12, c0 = 1 + (k % 5) * 5;
      for (int r = r0; r < r0 + 6; ++r)
        for (int c = c0; c < c0 + 5; ++c) img[i * 784 + r * 28 + c] = 250;
    }
    std::string ext = gz ? ".gz" : "";
    data::write_idx(dir + "/" + prefix + "-images-idx3-ubyte" + ext, {n, 28, 28}, img, gz);
    data::write_idx(dir + "/" + prefix + "-labels-idx1-ubyte" + ext, {n}, lab, gz);
  };
  make("train", n_train, true);
  make("t10k", n_test, false);
}

// A temporary folder per test, removed afterwards, holding the dataset in data/. The programs it
// runs inherit ENGINE_SYNC_GUARD=1 (core/sync_guard.h): a host read inside a training step fails
// the run, so every train test also proves that the step reads nothing back.
class TrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("ENGINE_SYNC_GUARD", "1", 1);
    data_ = (dir_ / "data").string();
    write_dataset(data_, 512, 200);
  }
  std::string path(const std::string& name) const { return tmp_.file(name); }
  // A port for this test's rendezvous: below the kernel's ephemeral range (32768 and up), so no
  // outgoing connection of another test can be holding it, spread by pid across concurrent test
  // processes, and bindable right now (the next candidate otherwise).
  static int port() {
    static int next = 0;
    for (int tries = 0; tries < 64; ++tries) {
      const int p = 20000 + (getpid() * 7 + next++ * 13) % 12000;
      if (port_is_free(p)) return p;
    }
    ADD_FAILURE() << "no free TCP port in 20000..31999 after 64 tries";
    return 0;
  }
  static bool port_is_free(int p) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return false;
    const int one = 1;  // as the store binds: a port in TIME_WAIT still counts as free
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(p));
    const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
  }
  TempDir tmp_;
  const fs::path& dir_ = tmp_.path();
  std::string data_;
};

inline std::vector<float> floats(const StFile& f, const std::string& name) {
  const StEntry* e = f.find(name);
  EXPECT_TRUE(e) << name;
  return e ? st_values<float>(*e) : std::vector<float>{};
}

// Largest difference over every float32 tensor of two safetensors files: relative
// (|a - b| / max(|a|, 1e-3 + |b|)) or absolute.
inline double max_diff(const std::string& a, const std::string& b, bool relative) {
  StFile fa = load_safetensors(a), fb = load_safetensors(b);
  double worst = 0;
  for (const StEntry& e : fa.entries) {
    if (e.dtype != DType::F32) continue;
    std::vector<float> x = floats(fa, e.name), y = floats(fb, e.name);
    EXPECT_EQ(x.size(), y.size()) << e.name;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      const double d = std::abs(static_cast<double>(x[i]) - y[i]);
      worst = std::max(worst,
                       relative ? d / std::max<double>(std::abs(x[i]), 1e-3 + std::abs(y[i])) : d);
    }
  }
  return worst;
}
inline double max_rel_diff(const std::string& a, const std::string& b) {
  return max_diff(a, b, true);
}
inline double max_abs_diff(const std::string& a, const std::string& b) {
  return max_diff(a, b, false);
}

// Every tensor of two safetensors files has the same bytes.
inline void expect_same_bits(const std::string& a, const std::string& b) {
  StFile fa = load_safetensors(a), fb = load_safetensors(b);
  ASSERT_EQ(fa.entries.size(), fb.entries.size());
  for (const StEntry& e : fa.entries) {
    const StEntry* o = fb.find(e.name);
    ASSERT_TRUE(o) << e.name;
    EXPECT_TRUE(e.bytes == o->bytes) << e.name << " differs";
  }
}

// `common` (a train command line) run to step 11 in one go, and to step 5 with a checkpoint then
// resumed to step 11: the same weights, bit for bit. Files go to dir.
inline void expect_resume_bit_for_bit(const std::string& common, const fs::path& dir) {
  auto path = [&](const std::string& name) { return (dir / name).string(); };
  RunResult a = run(common + " --steps 11 --save " + path("a.safetensors"));
  ASSERT_EQ(a.code, 0) << a.output;
  RunResult b1 = run(common + " --steps 5 --checkpoint " + path("c.safetensors"));
  ASSERT_EQ(b1.code, 0) << b1.output;
  RunResult b2 = run(common + " --steps 11 --resume " + path("c.safetensors") + " --save " +
                     path("b.safetensors"));
  ASSERT_EQ(b2.code, 0) << b2.output;
  EXPECT_NE(b2.output.find("Resumed"), std::string::npos) << b2.output;
  expect_same_bits(path("a.safetensors"), path("b.safetensors"));
}

}  // namespace engine::testing
