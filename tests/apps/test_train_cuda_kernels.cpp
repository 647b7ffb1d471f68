// tests/apps/test_train_cuda_kernels.cpp: train --cuda-kernels: on the CPU either value trains the
// same bytes (the flag chooses CUDA kernels only); an unknown value is a usage error naming the
// flag. The engine's kernels themselves: the kernel-case table's /engine cases, on a GPU.
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
    RunResult r = run(kTrain + " --device cpu --threads 2 --model net --steps 3 --data-dir " +
                      data_ + " --cuda-kernels " + k + " --save " + out);
    ASSERT_EQ(r.code, 0) << r.output;
    saved[i++] = bytes_of(out);
  }
  EXPECT_FALSE(saved[0].empty());
  EXPECT_EQ(saved[0], saved[1]);
}

TEST_F(TrainTest, CudaKernelsRejectsAnUnknownValue) {
  RunResult bad = run(kTrain + " --cuda-kernels fast --data-dir " + data_);
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--cuda-kernels: 'fast' is not one of library|engine"),
            std::string::npos)
      << bad.output;
}

}  // namespace
