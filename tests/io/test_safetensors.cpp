// tests/io/test_safetensors.cpp: safetensors round trips, every malformed-file error, atomic
// writes under failure and crash, and interop with PyTorch (skipped when torch is absent).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "tests/common/expect_error.h"
#include "tests/common/temp_dir.h"

namespace engine {
namespace {

namespace fs = std::filesystem;
using testing::expect_error;

class SafetensorsFiles : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return tmp_.file(name); }
  // Names in the directory that look like our temporary files.
  std::vector<std::string> temp_files() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().filename().string().find(".tmp.") != std::string::npos)
        out.push_back(e.path().filename().string());
    return out;
  }
  testing::TempDir tmp_;
  const fs::path& dir_ = tmp_.path();
};

// A file image from a raw header text and buffer, for the malformed cases.
std::string raw_file(const std::string& header, const std::string& buffer) {
  std::string out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xFF);
  return out + header + buffer;
}

void expect_same(const StEntry& a, const StEntry& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.dtype, b.dtype) << a.name;
  EXPECT_EQ(a.shape, b.shape) << a.name;
  EXPECT_EQ(a.bytes, b.bytes) << a.name;
}

std::vector<StEntry> sample_entries() {
  return {
      st_entry<float>("conv1.weight", {2, 3}, {1.5f, -2.f, 0.f, 3.25f, 1e-30f, -7.f}),
      st_entry<int64_t>("bn1.num_batches_tracked", {}, {int64_t{1} << 40}),  // 0-d scalar
      st_entry<uint8_t>("mask", {5}, {0, 1, 127, 128, 255}),
      st_entry<float>("empty", {0, 4}, {}),
      st_entry<int64_t>("ids", {3}, {-1, 0, INT64_MAX}),
      st_entry<uint8_t>("empty_u8", {2, 0, 3}, {}),
      st_entry<float>("scalar", {}, {42.f}),
  };
}

TEST_F(SafetensorsFiles, RoundTripsDtypesShapesAndMetadata) {
  auto entries = sample_entries();
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"step", "12"}, {"note", "a\"b"}};
  save_safetensors(path("m.safetensors"), entries, meta);
  StFile f = load_safetensors(path("m.safetensors"));
  EXPECT_EQ(f.metadata, meta);
  ASSERT_EQ(f.entries.size(), entries.size());
  for (size_t i = 0; i < entries.size(); ++i) expect_same(f.entries[i], entries[i]);
  ASSERT_NE(f.find("ids"), nullptr);
  EXPECT_EQ(st_values<int64_t>(*f.find("ids"))[2], INT64_MAX);
  EXPECT_EQ(f.find("nope"), nullptr);
  EXPECT_EQ(f.find("bn1.num_batches_tracked")->numel(), 1);
  EXPECT_EQ(f.find("empty")->numel(), 0);
  expect_error([&] { st_values<float>(*f.find("ids")); }, {"'ids'", "I64", "not F32"});
  EXPECT_TRUE(temp_files().empty());
}

TEST(Safetensors, LayoutMatchesTheSpecByteForByte) {
  std::string got =
      encode_safetensors({st_entry<float>("a", {1}, {1.0f}), st_entry<uint8_t>("b", {2}, {7, 9})});
  std::string header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                       R"("b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string want = raw_file(header, std::string("\x00\x00\x80\x3f\x07\x09", 6));
  EXPECT_EQ(got, want);
  EXPECT_EQ((got.size() - 6) % 8, 0u);
  EXPECT_EQ(encode_safetensors({}), raw_file("{}      ", ""));
  EXPECT_TRUE(decode_safetensors(encode_safetensors({})).entries.empty());
}

TEST(Safetensors, MetadataComesFirstInTheHeader) {
  std::string f = encode_safetensors({st_entry<float>("w", {1}, {2.f})}, {{"format", "pt"}});
  EXPECT_EQ(f.substr(8, 32), R"({"__metadata__":{"format":"pt"},)");
}

TEST(Safetensors, HeaderOrderMayDifferFromDataOrder) {
  // As safetensors.torch writes: header keys sorted, data sorted by dtype size.
  std::string h = R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[8,10]},)"
                  R"("b":{"dtype":"I64","shape":[],"data_offsets":[0,8]}})";
  std::string buf("\x05\x00\x00\x00\x00\x00\x00\x00\x01\x02", 10);
  StFile f = decode_safetensors(raw_file(h, buf));
  ASSERT_EQ(f.entries.size(), 2u);
  EXPECT_EQ(f.entries[0].name, "a");
  EXPECT_EQ(st_values<uint8_t>(f.entries[0]), (std::vector<uint8_t>{1, 2}));
  EXPECT_EQ(st_values<int64_t>(f.entries[1]), (std::vector<int64_t>{5}));
}

TEST(Safetensors, EncodeRejectsBadEntries) {
  expect_error(
      [] {
        encode_safetensors({st_entry<float>("w", {1}, {1.f}), st_entry<float>("w", {1}, {2.f})});
      },
      {"duplicate tensor name 'w'"});
  expect_error([] { encode_safetensors({st_entry<float>("__metadata__", {1}, {1.f})}); },
               {"__metadata__"});
  expect_error(
      [] {
        encode_safetensors({st_entry<float>("w", {2, 2}, {1.f, 2.f})});
      },
      {"'w'", "8 bytes", "F32 [2, 2] needs 16"});
  expect_error([] { encode_safetensors({st_entry<float>("w", {-1}, {})}); },
               {"'w'", "bad shape [-1]"});
  expect_error([] { encode_safetensors({st_entry<float>("w\xFF", {1}, {1.f})}); },
               {"not valid UTF-8"});
  expect_error([] { encode_safetensors({}, {{"note", "\xC3"}}); }, {"not valid UTF-8"});
}

// Each malformed file gives an error naming the file and the tensor or field at fault.
TEST(Safetensors, RejectsMalformedFiles) {
  auto bad = [](const std::string& file, std::initializer_list<std::string> parts) {
    std::vector<std::string> all(parts);
    all.push_back("'bad.st'");
    expect_error([&] { decode_safetensors(file, "bad.st"); }, all);
  };
  auto rec = [](const std::string& name, const std::string& body) {
    return "\"" + name + "\":{" + body + "}";
  };
  const std::string f32x2 = std::string(8, '\0');

  bad("12345", {"5 bytes", "too short"});
  bad(std::string("\x10\x00\x00\x00\x00\x00\x00\x00{}", 10), {"header length 16", "past the end"});
  bad(std::string("\xff\xff\xff\xff\xff\xff\xff\xff", 8) + "{}", {"above the limit"});
  bad(raw_file("[1, 2]  ", ""), {"does not start with '{'"});
  bad(raw_file(R"({"w":{"dtype":"F32",)", ""), {"not valid JSON", "at byte 20"});
  bad(raw_file("{" + rec("w", R"("dtype":"F32","shape":[2],"data_offsets":[0,8])") + "," +
                   rec("w", R"("dtype":"F32","shape":[2],"data_offsets":[8,16])") + "}",
               f32x2 + f32x2),
      {"duplicate key \"w\""});
  bad(raw_file("{" + rec("h", R"("dtype":"F16","shape":[2],"data_offsets":[0,4])") + "}",
               std::string(4, '\0')),
      {"tensor 'h'", "dtype F16", "does not hold"});
  bad(raw_file("{" + rec("q", R"("dtype":"Q7","shape":[2],"data_offsets":[0,4])") + "}", ""),
      {"tensor 'q'", "dtype Q7", "does not hold"});
  bad(raw_file("{" + rec("w", R"("shape":[2],"data_offsets":[0,8])") + "}", f32x2),
      {"tensor 'w'", "\"dtype\""});
  bad(raw_file("{" + rec("w", R"("dtype":"F32","data_offsets":[0,8])") + "}", f32x2),
      {"tensor 'w'", "\"shape\""});
  bad(raw_file("{" + rec("w", R"("dtype":"F32","shape":[-2],"data_offsets":[0,8])") + "}", f32x2),
      {"tensor 'w'", "holds -2"});
  bad(raw_file("{" + rec("w", R"("dtype":"F32","shape":[1.5],"data_offsets":[0,8])") + "}", f32x2),
      {"tensor 'w'", "holds 1.5"});
  bad(raw_file("{" +
                   rec("w", R"("dtype":"F32","shape":[4294967296,4294967296],)"
                            R"("data_offsets":[0,8])") +
                   "}",
               f32x2),
      {"tensor 'w'", "too large"});
  bad(raw_file("{" + rec("w", R"("dtype":"F32","shape":[2])") + "}", f32x2),
      {"tensor 'w'", "\"data_offsets\""});
  bad(raw_file("{" + rec("w", R"("dtype":"F32","shape":[2],"data_offsets":[0])") + "}", f32x2),
      {"tensor 'w'", "\"data_offsets\""});
  bad(raw_file("{" + rec("w", R"("dtype":"F32","shape":[2],"data_offsets":[0,-8])") + "}", f32x2),
      {"tensor 'w'", "holds -8"});
  bad(raw_file("{" + rec("w", R"("dtype":"F32","shape":[2],"data_offsets":[8,0])") + "}", f32x2),
      {"tensor 'w'", "end before they begin"});
  bad(raw_file("{" + rec("w", R"("dtype":"F32","shape":[2],"data_offsets":[4,12])") + "}", f32x2),
      {"tensor 'w'", "[4, 12]", "past the end of the byte buffer (8 bytes)"});
  bad(raw_file("{" + rec("w", R"("dtype":"F32","shape":[3],"data_offsets":[0,8])") + "}", f32x2),
      {"tensor 'w'", "span 8 bytes but F32 [3] needs 12"});
  bad(raw_file("{" + rec("a", R"("dtype":"F32","shape":[2],"data_offsets":[0,8])") + "," +
                   rec("b", R"("dtype":"F32","shape":[2],"data_offsets":[4,12])") + "}",
               f32x2 + std::string(4, '\0')),
      {"tensor 'b'", "overlaps tensor 'a'"});
  bad(raw_file("{" + rec("a", R"("dtype":"F32","shape":[2],"data_offsets":[0,8])") + "," +
                   rec("z", R"("dtype":"F32","shape":[0],"data_offsets":[4,4])") + "}",
               f32x2),
      {"tensor 'z'", "overlaps tensor 'a'"});
  bad(raw_file("{" + rec("a", R"("dtype":"F32","shape":[1],"data_offsets":[4,8])") + "}", f32x2),
      {"bytes [0, 4)", "belong to no tensor", "'a'"});
  bad(raw_file("{" + rec("a", R"("dtype":"F32","shape":[1],"data_offsets":[0,4])") + "}", f32x2),
      {"last 4 bytes", "belong to no tensor"});
  bad(raw_file(R"({"__metadata__":{"step":12}})", ""), {"metadata \"step\"", "not a string"});
  bad(raw_file(R"({"__metadata__":["x"]})", ""), {"\"__metadata__\" is not an object"});
  bad(raw_file(R"({"w":[1,2]})", ""), {"tensor 'w'", "not an object"});
}

TEST_F(SafetensorsFiles, LoadNamesAMissingFile) {
  expect_error([&] { load_safetensors(path("none.safetensors")); },
               {path("none.safetensors"), "No such file"});
  expect_error([&] { read_file(dir_.string()); }, {dir_.string(), "directory"});
}

TEST_F(SafetensorsFiles, AtomicWriteReplacesAndLeavesNoTemporary) {
  write_file_atomic(path("f"), "old");
  write_file_atomic(path("f"), "new content");
  EXPECT_EQ(read_file(path("f")), "new content");
  write_file_atomic(path("f"), "");
  EXPECT_EQ(read_file(path("f")), "");
  EXPECT_TRUE(temp_files().empty());
}

TEST_F(SafetensorsFiles, FailedWriteKeepsTheOldFile) {
  // Target is a directory: the rename fails after the data was written and synced.
  fs::create_directory(path("d"));
  expect_error([&] { write_file_atomic(path("d"), "data"); }, {path("d"), "rename"});
  EXPECT_TRUE(fs::is_directory(path("d")));
  // Missing directory: the temporary cannot even be created.
  expect_error([&] { write_file_atomic(path("no/such/f"), "data"); },
               {path("no/such/f"), "No such file"});
  // A save whose entries are bad never touches the old file.
  save_safetensors(path("m.st"), sample_entries());
  std::string before = read_file(path("m.st"));
  expect_error([&] { save_safetensors(path("m.st"), {st_entry<float>("w", {3}, {1.f})}); },
               {path("m.st"), "'w'"});
  EXPECT_EQ(read_file(path("m.st")), before);
  EXPECT_TRUE(temp_files().empty());
}

// Runs `body` in a child limited to `limit` bytes per file; returns the raw wait status.
template <class F>
int run_with_file_size_limit(rlim_t limit, bool crash_on_limit, F&& body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    rlimit core{0, 0};
    ::setrlimit(RLIMIT_CORE, &core);
    if (!crash_on_limit) ::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG
    rlimit fsize{limit, limit};
    ::setrlimit(RLIMIT_FSIZE, &fsize);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST_F(SafetensorsFiles, WriteFailingMidwayKeepsTheOldFile) {
  std::string old(1000, 'o');
  write_file_atomic(path("ckpt"), old);
  std::string big(1 << 20, 'n');  // past the 64 KiB limit: the disk is "full" midway
  int status = run_with_file_size_limit(1 << 16, false, [&] {
    try {
      write_file_atomic(path("ckpt"), big);
      return 1;
    } catch (const Error& e) {
      std::string m = e.what();
      return m.find(path("ckpt")) != std::string::npos && m.find("File too large") != m.npos ? 0
                                                                                             : 2;
    }
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: no error thrown; 2: message lacks path or reason";
  EXPECT_EQ(read_file(path("ckpt")), old);
  EXPECT_TRUE(temp_files().empty());
}

TEST_F(SafetensorsFiles, CrashMidwayKeepsTheOldFile) {
  std::string old(1000, 'o');
  write_file_atomic(path("ckpt"), old);
  std::string big(1 << 20, 'n');
  int status = run_with_file_size_limit(1 << 16, true, [&] {
    write_file_atomic(path("ckpt"), big);  // killed by SIGXFSZ inside write()
    return 1;
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGXFSZ);
  EXPECT_EQ(read_file(path("ckpt")), old);
  EXPECT_EQ(temp_files().size(), 1u);  // the crash leaves its temporary, never a torn target
  write_file_atomic(path("ckpt"), big);
  EXPECT_EQ(read_file(path("ckpt")), big);
}

// ---- Interop with PyTorch, through tests/io/make_torch_safetensors.py ----

bool torch_available() {
  return std::system("/usr/bin/python3 -c 'import torch, numpy' >/dev/null 2>&1") == 0;
}

std::string script_path() {
  return (fs::path(__FILE__).parent_path() / "make_torch_safetensors.py").string();
}

// Runs the script; returns its output, fails the test on a non-zero exit.
::testing::AssertionResult run_script(const std::string& args, const std::string& log) {
  std::string cmd = "/usr/bin/python3 '" + script_path() + "' " + args + " >'" + log + "' 2>&1";
  int rc = std::system(cmd.c_str());
  std::string out = fs::exists(log) ? read_file(log) : "";
  if (rc != 0) return ::testing::AssertionFailure() << cmd << " failed:\n" << out;
  return ::testing::AssertionSuccess() << out;
}

// Same formula as expected_value() in the script; exact in float32.
StEntry expected_entry(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                       int salt) {
  int64_t sum = 0, n = 1;
  for (unsigned char c : name) sum += c;
  const int64_t k = sum % 101 + 101 * salt;
  for (int64_t d : shape) n *= d;
  std::vector<float> f;
  std::vector<uint8_t> u;
  std::vector<int64_t> l;
  for (int64_t i = 0; i < n; ++i) {
    f.push_back(static_cast<float>(((i * 7 + k) % 97 - 48) / 16.0));
    u.push_back(static_cast<uint8_t>((i * 31 + k) % 256));
    l.push_back((i % 2 == 0 ? 1 : -1) * ((i + 1) * (int64_t{1} << 40) + k * 3 - 7));
  }
  if (dtype == DType::F32) return st_entry(name, shape, f);
  if (dtype == DType::U8) return st_entry(name, shape, u);
  return st_entry(name, shape, l);
}

TEST_F(SafetensorsFiles, LoadsAFileWrittenFromAPyTorchStateDict) {
  if (!torch_available()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch and numpy";
  ASSERT_TRUE(run_script("write '" + path("torch.st") + "' 0", path("log")));
  StFile f = load_safetensors(path("torch.st"));
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  // PyTorch's own names, dtypes and shapes for the script's Net.
  struct Want {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
  };
  std::vector<Want> want = {{"conv1.weight", DType::F32, {4, 1, 3, 3}},
                            {"conv1.bias", DType::F32, {4}},
                            {"bn1.weight", DType::F32, {4}},
                            {"bn1.bias", DType::F32, {4}},
                            {"bn1.running_mean", DType::F32, {4}},
                            {"bn1.running_var", DType::F32, {4}},
                            {"bn1.num_batches_tracked", DType::I64, {}},
                            {"layer1.0.weight", DType::F32, {4, 4, 3, 3}},
                            {"layer1.1.weight", DType::F32, {4}},
                            {"layer1.1.bias", DType::F32, {4}},
                            {"layer1.1.running_mean", DType::F32, {4}},
                            {"layer1.1.running_var", DType::F32, {4}},
                            {"layer1.1.num_batches_tracked", DType::I64, {}},
                            {"fc.weight", DType::F32, {10, 16}},
                            {"fc.bias", DType::F32, {10}},
                            {"mask", DType::U8, {3, 5}},
                            {"empty", DType::F32, {0, 3}}};
  ASSERT_EQ(f.entries.size(), want.size());
  for (const Want& w : want) {
    const StEntry* e = f.find(w.name);
    ASSERT_NE(e, nullptr) << w.name;
    expect_same(*e, expected_entry(w.name, w.dtype, w.shape, 0));
  }
}

TEST_F(SafetensorsFiles, PyTorchLoadsOurFileIntoItsModule) {
  if (!torch_available()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch and numpy";
  ASSERT_TRUE(run_script("write '" + path("torch.st") + "' 0", path("log")));
  // Same names and shapes, new values (salt 1), in our own order: reversed header order.
  StFile theirs = load_safetensors(path("torch.st"));
  std::vector<StEntry> ours;
  for (auto it = theirs.entries.rbegin(); it != theirs.entries.rend(); ++it)
    ours.push_back(expected_entry(it->name, it->dtype, it->shape, 1));
  save_safetensors(path("ours.st"), ours, {{"written_by", "engine"}});
  EXPECT_TRUE(run_script("check '" + path("ours.st") + "' 1", path("log")));
  // And the check itself can fail: salt 0 values are not what we wrote.
  EXPECT_FALSE(run_script("check '" + path("ours.st") + "' 0", path("log2")));
}

}  // namespace
}  // namespace engine
