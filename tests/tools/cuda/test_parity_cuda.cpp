// parity and stress kv with a CUDA device (on the emulated device in CI, docs/cuda-emulation.md): the CUDA paths
// run and pass — the full forward and the cached decode (eager and CUDA graph, the two bit for bit equal) within the
// bf16-activations tolerance of the CPU, the dense BF16 weights likewise, the training forward on CUDA (train-cuda)
// within bf16-activations of the CPU's — and the KV-cache stress matrix passes on CUDA through the decode graph. The
// measured max |Δlogit| of each pair is printed (the defaults in tools/logit_diff.h come from such runs).
#include <gtest/gtest.h>

#include <cstdio>
#include <map>

#include "io/quantize_model.h"
#include "model/qwen3_model.h"
#include "ops/nvfp4_w4a4_linear.h"
#include "tokenizer/tokenizer.h"
#include "tools/parity.h"
#include "tools/stress_kv.h"
#include "tools/tools_test_util.h"
#include "train/calibrate.h"

namespace nvfp4lm::test::test_parity_cuda {
namespace {

TEST(ParityCuda, CudaPathsRunAndPass) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  TempDir dir;
  ParityOptions options;
  options.model = quantize_to(synth_chat_model(dir, "dense"), dir, "dat", ModelFormat::Dat);
  options.prompts = {"Hello, who are you?"};
  options.new_tokens = 4;
  options.cuda = Device::cuda(0);
  options.temp_dir = dir.path();
  const ParityReport report = run_parity(options);
  ASSERT_TRUE(report.pass()) << parity_table(report);
  std::map<std::string, ParityPair> pairs;
  for (const ParityPair& pair : report.prompts.at(0).pairs) {
    pairs[pair.path + " vs " + pair.against] = pair;
    std::fprintf(stderr, "[parity] %-28s %-17s max |dlogit| %.3g, max |reference| %.3g, relative %.3g\n",
                 (pair.path + " vs " + pair.against).c_str(),
                 std::string(tolerance_class_name(pair.tolerance_class)).c_str(), pair.diff.max_abs_diff,
                 pair.diff.max_abs_reference,
                 pair.diff.max_abs_reference > 0 ? pair.diff.max_abs_diff / pair.diff.max_abs_reference : 0.0);
  }
  for (const char* name : {"cuda vs reference", "cuda-eager vs cuda", "cuda-graph vs cuda-eager",
                           "cuda-dense vs cpu-dense", "train-cuda vs train-forward"}) {
    ASSERT_TRUE(pairs.count(name)) << name << "\n" << parity_table(report);
    EXPECT_TRUE(pairs.at(name).pass()) << name;
    EXPECT_EQ(pairs.at(name).diff.positions, static_cast<int64_t>(report.prompts[0].ids.size())) << name;
  }
  EXPECT_EQ(pairs.at("cuda-graph vs cuda-eager").diff.max_abs_diff, 0) << "a replayed graph gives the eager bits";
  EXPECT_GT(pairs.at("cuda vs reference").diff.max_abs_diff, 0) << "bf16 activations differ from fp32";
  for (const ParityPath& path : report.paths) {
    if (path.name.rfind("cuda", 0) != 0) continue;
    EXPECT_EQ(path.skipped, "") << path.name;
    EXPECT_EQ(path.device, Device::cuda(0).label()) << path.name;
  }
}

// A W4A4 checkpoint (input scales calibrated on text): every inference path runs its layers' activations in NVFP4 —
// the cuda paths on the FP4 tensor cores where the (emulated) device is Blackwell SM 12.x, the gb10 configuration —
// the ModelOpt copy keeps its input scales as stored (identical logits), the .dat and dense copies are skipped (they
// cannot hold them), and every pair passes. (The training paths are W4A16 QAT: left out here, they are parity's
// other test.)
TEST(ParityCuda, W4a4CheckpointPathsPass) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  TempDir dir;
  const fs::path source = synth_chat_model(dir, "dense");
  write_file(dir / "calibration.txt", "Calibration text: the quick brown fox jumps over the lazy dog, twice.");
  CalibrationOptions calibration;
  calibration.data = dir / "calibration.txt";
  calibration.seq_len = 64;
  QuantizeOptions quantize;
  quantize.calibration = calibrate_source_model(*open_model(source), Tokenizer::load(source), calibration);
  quantize_model(*open_model(source), dir / "w4a4", quantize);
  ParityOptions options;
  options.model = dir / "w4a4";
  options.prompts = {"Hello, who are you?"};
  options.new_tokens = 4;
  options.cuda = Device::cuda(0);
  options.temp_dir = dir.path();
  options.train_forward = false;
  const ParityReport report = run_parity(options);
  ASSERT_TRUE(report.pass()) << parity_table(report);
  const bool fp4 = nvfp4_w4a4_native(Device::cuda(0));
  std::map<std::string, ParityPath> paths;
  for (const ParityPath& path : report.paths) paths[path.name] = path;
  for (const char* name : {"reference", "cpu-cache", "cpu-dense", "cpu-bf16", "cpu-int8", "copy-modelopt", "cuda",
                           "cuda-eager", "cuda-graph", "cuda-dense"}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(paths.count(name));
    EXPECT_EQ(paths.at(name).skipped, "");
    EXPECT_NE(paths.at(name).precision.find("W4A4"), std::string::npos) << paths.at(name).precision;
  }
  const std::string& cuda_path = paths.at("cuda").compute_path;
  if (fp4)  // "cuda/nvfp4-mma-fp4 + cuda/nvfp4-w4a16" on the emulated GB10
    EXPECT_EQ(cuda_path.rfind(nvfp4_w4a4_compute_path(Device::cuda(0)), 0), 0u) << cuda_path;
  else
    EXPECT_EQ(cuda_path, "cuda/nvfp4-w4a16 (W4A4 layers: their NVFP4 activations' values)");
  for (const char* name : {"copy-dat", "copy-bf16"})
    EXPECT_NE(paths.at(name).skipped.find("W4A4 checkpoint"), std::string::npos)
        << name << ": " << paths.at(name).skipped;
  for (const ParityPair& pair : report.prompts.at(0).pairs) {
    if (pair.path == "copy-modelopt") {
      EXPECT_EQ(pair.diff.max_abs_diff, 0) << "the copy keeps the input scales";
    }
  }
}

TEST(ParityCuda, StressKvPassesThroughTheDecodeGraph) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  TempDir dir;
  const fs::path path = quantize_to(synth_chat_model(dir, "dense"), dir, "nvfp4", ModelFormat::ModeloptNvfp4);
  ModelOptions model_options;
  model_options.device = Device::cuda(0);
  const Qwen3Model model = Qwen3Model::load(path, model_options);
  StressKvOptions options;
  options.decode = DecodeMode::Graph;
  options.max_cache = 48;  // the emulated device is slow: the short matrix's smaller caches
  const StressKvReport report = run_stress_kv(model, Tokenizer::load(path), options);
  ASSERT_TRUE(report.pass()) << stress_kv_table(report);
  EXPECT_EQ(report.tolerance_class, ToleranceClass::Bf16Activations);
  EXPECT_GT(report.cases.size(), 10u);
  double worst = 0;
  for (const StressCaseResult& c : report.cases)
    worst = std::max(worst, c.worst.max_abs_diff / c.worst.max_abs_reference);
  std::fprintf(stderr, "[stress kv] cuda graph vs full forward: worst relative max |dlogit| %.3g over %zu cases\n",
               worst, report.cases.size());
}

}  // namespace
}  // namespace nvfp4lm::test::test_parity_cuda
