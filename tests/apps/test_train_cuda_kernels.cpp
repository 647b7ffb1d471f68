// tests/apps/test_train_cuda_kernels.cpp: train under ENGINE_CUDA_KERNELS: on the CPU either value
// trains the same bytes (it chooses CUDA kernels only); an unknown value stops train naming the
// variable. The engine's kernels themselves: the kernel-case table's /engine cases, on a GPU.
#include <fstream>
#include <iterator>
#include <string>

#include "tests/apps/train_fixture.h"

using namespace engine;
using namespace engine::testing;

namespace {

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST_F(TrainTest, CudaKernelsChangeNothingOnTheCpu) {
  std::string saved[2];
  int i = 0;
  for (const char* k : {"library", "engine"}) {
    const std::string out = path(std::string(k) + ".safetensors");
    RunResult r = run("ENGINE_CUDA_KERNELS=" + std::string(k) + " " + kTrain +
                      " --device cpu --threads 2 --model net --steps 3 --data-dir " + data_ +
                      " --save " + out);
    ASSERT_EQ(r.code, 0) << r.output;
    saved[i++] = bytes_of(out);
  }
  EXPECT_FALSE(saved[0].empty());
  EXPECT_EQ(saved[0], saved[1]);
}

TEST_F(TrainTest, CudaKernelsRejectsAnUnknownValue) {
  RunResult bad = run("ENGINE_CUDA_KERNELS=fast " + kTrain + " --data-dir " + data_);
  EXPECT_EQ(bad.code, 1) << bad.output;
  EXPECT_NE(bad.output.find("ENGINE_CUDA_KERNELS=fast: expected library|engine"), std::string::npos)
      << bad.output;
}

}  // namespace
