// tests/apps/test_gpu_bench.cpp: scripts/gpu_bench.sh exits 2 at once without a GPU, and its
// report writer, scripts/gpu_bench_report.py, turns raw outputs of real CPU runs (train --metrics
// and its progress lines, allreduce_bench --json, a torch_mnist_gpu.py line) into the .md and the
// .json rows the issues ask for: keys, types, the second epoch picked, the steady rate derived.
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "io/json.h"
#include "tests/apps/train_fixture.h"

namespace engine::testing {
namespace {

const std::string kSource = ENGINE_SOURCE_DIR;

TEST(GpuBench, WithoutAGpuItExitsTwoAtOnceSayingSo) {
  const std::string script = kSource + "/scripts/gpu_bench.sh";
  ASSERT_EQ(access(script.c_str(), X_OK), 0) << script << " is not executable";
  TempDir dir;
  for (const char* smi : {"/bin/false", "/nonexistent/nvidia-smi"}) {
    const auto t0 = std::chrono::steady_clock::now();
    const RunResult r =
        run("NVIDIA_SMI=" + std::string(smi) + " OUT_DIR=" + dir.file("out") + " " + script);
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_NE(r.output.find("gpu_bench: no NVIDIA GPU on this machine"), std::string::npos)
        << r.output;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10)) << "not at once";
    EXPECT_FALSE(fs::exists(dir.file("out"))) << "no report without a GPU";
  }
}

std::vector<Json> json_lines(const std::string& path) {
  std::vector<Json> out;
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);)
    if (!line.empty()) out.push_back(parse_json(line, path));
  return out;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

// The raw folder gpu_bench.sh leaves, from real CPU runs: train (net, 2 epochs of 128 batches, so
// that the progress lines have a batch 100), allreduce_bench (2 ranks, 8 B and 256 B), and the
// line torch_mnist_gpu.py prints.
class GpuBenchReport : public TrainTest {
 protected:
  void make_raw() {
    raw_ = path("raw");
    fs::create_directories(raw_);
    const RunResult t = run(kTrain + " --model net --epochs 2 --batch-size 4 --device cpu " +
                            "--threads 1 --data-dir " + data_ + " --metrics " + raw_ +
                            "/train.jsonl > " + raw_ + "/step1.log");
    ASSERT_EQ(t.code, 0) << t.output << read_text(raw_ + "/step1.log");
    const RunResult a = run(kBuild + "/apps/allreduce_bench --world-size 2 --device cpu " +
                            "--min-bytes 8 --max-bytes 256 --step-factor 32 --iters 5 --json " +
                            raw_ + "/ar.json > " + raw_ + "/step2.log");
    ASSERT_EQ(a.code, 0) << a.output << read_text(raw_ + "/step2.log");
    write_file(raw_ + "/step3.log",
               "{\"model\": \"net\", \"device\": \"NVIDIA H100\", \"torch\": \"2.11.0\", \"bf16\": "
               "false, \"compile\": false, \"epochs\": 1, \"batch_size\": 128, \"train_s\": 0.5, "
               "\"images_per_s\": 123456.7, \"steady_images_per_s\": 130000.0, \"test_acc\": "
               "0.85}\n");
    write_file(raw_ + "/steps.jsonl",
               "{\"n\": 1, \"kind\": \"train\", \"name\": \"train net fp32 defaults\", \"cmd\": "
               "\"train --model net\", \"rc\": 0, \"seconds\": 2.0, \"limit_s\": 90, \"log\": "
               "\"step1.log\", \"model\": \"net\", \"precision\": \"fp32\", \"variant\": "
               "\"defaults\", \"metrics\": \"train.jsonl\", \"batch_size\": 4}\n"
               "{\"n\": 2, \"kind\": \"collective\", \"name\": \"allreduce_bench ipc blocking\", "
               "\"cmd\": \"allreduce_bench\", \"rc\": 0, \"seconds\": 1.0, \"limit_s\": 60, "
               "\"log\": \"step2.log\", \"backend\": \"ipc\", \"protocol\": \"blocking\", \"mps\": "
               "false, \"json\": \"ar.json\"}\n"
               "{\"n\": 3, \"kind\": \"torch\", \"name\": \"torch net fp32 eager\", \"cmd\": "
               "\"python3 torch_mnist_gpu.py\", \"rc\": 0, \"seconds\": 9.0, \"limit_s\": 90, "
               "\"log\": \"step3.log\", \"model\": \"net\", \"precision\": \"fp32\", \"compile\": "
               "false}\n"
               "{\"n\": 4, \"kind\": \"train\", \"name\": \"train net fp32 engine\", \"skip\": "
               "\"train lacks --cuda-graph (this build)\", \"model\": \"net\", \"precision\": "
               "\"fp32\", \"variant\": \"engine\", \"metrics\": \"none.jsonl\"}\n");
    write_file(raw_ + "/info.json", "{\"gpu\": \"NVIDIA H100\", \"commit\": \"abc1234\"}\n");
  }
  std::vector<Json> rows_of(const std::string& what) const {
    std::vector<Json> out;
    for (const Json& r : rows_)
      if (r["what"] == what) out.push_back(r);
    return out;
  }
  std::string raw_;
  std::vector<Json> rows_;
};

TEST_F(GpuBenchReport, RowsFromRealCpuRunsHaveTheIssuesKeys) {
  ASSERT_NO_FATAL_FAILURE(make_raw());
  const std::string out = path("report");
  const RunResult r =
      run("python3 " + kSource + "/scripts/gpu_bench_report.py " + raw_ + " " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  rows_ = json_lines(out + ".json");
  const std::vector<Json> metrics = json_lines(raw_ + "/train.jsonl");
  ASSERT_EQ(metrics.size(), 2u);

  const std::vector<Json> train = rows_of("train");
  ASSERT_EQ(train.size(), 2u);
  const Json& t = train[0];
  EXPECT_EQ(t["model"], "net");
  EXPECT_EQ(t["precision"], "fp32");
  EXPECT_EQ(t["variant"], "defaults");
  // The second epoch's figure, not the first's.
  EXPECT_EQ(t["images_per_s"].get<double>(), metrics[1]["images_per_s"].get<double>());
  EXPECT_EQ(t["test_acc"].get<double>(), metrics[1]["test_acc"].get<double>());
  ASSERT_TRUE(t["steady_images_per_s"].is_number()) << t.dump();
  EXPECT_GT(t["steady_images_per_s"].get<double>(), 0);
  EXPECT_EQ(t["torch_eager_images_per_s"].get<double>(), 123456.7);
  EXPECT_TRUE(t["torch_compile_images_per_s"].is_null());
  EXPECT_TRUE(train[1]["images_per_s"].is_null());
  EXPECT_EQ(train[1]["skip"], "train lacks --cuda-graph (this build)");

  const std::vector<Json> coll = rows_of("collective");
  ASSERT_EQ(coll.size(), 2u);  // 8 B and 256 B
  for (const Json& c : coll) {
    EXPECT_EQ(c["backend"], "ipc");
    EXPECT_EQ(c["protocol"], "blocking");
    EXPECT_EQ(c["mode"], "time-sliced");
    EXPECT_TRUE(c["bytes"].is_number_integer());
    EXPECT_GT(c["time_us"].get<double>(), 0);
    EXPECT_TRUE(c["busbw_gbs"].is_number());
    EXPECT_EQ(c["wrong"], 0);
  }
  EXPECT_EQ(coll[0]["bytes"], 8);
  EXPECT_EQ(coll[1]["bytes"], 256);
  EXPECT_EQ(rows_of("step").size(), 4u);

  const std::string md = read_text(out + ".md");
  for (const char* want :
       {"## Targets", "| net fp32 >= 600,000 images/s |", "| net | fp32 | defaults |",
        "| ipc | blocking | time-sliced | 8 |", "$ train --model net",
        "skip: train lacks --cuda-graph (this build)", "Rank 0, epoch 1, batch 100/128"})
    EXPECT_NE(md.find(want), std::string::npos) << "the report lacks: " << want << "\n" << md;
}

// A raw folder without steps is an error naming it, not an empty report.
TEST(GpuBench, ReportOfAnEmptyFolderFails) {
  TempDir dir;
  const RunResult r = run("python3 " + kSource + "/scripts/gpu_bench_report.py " +
                          dir.path().string() + " " + dir.file("out"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("steps.jsonl: no steps"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace engine::testing
