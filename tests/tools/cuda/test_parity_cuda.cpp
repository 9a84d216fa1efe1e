// parity and stress kv with a CUDA device (on the emulated device in CI, docs/cuda-emulation.md): the CUDA paths
// run and pass — the full forward and the cached decode (eager and CUDA graph, the two bit for bit equal) within the
// bf16-activations tolerance of the CPU, the dense BF16 weights likewise, the training forward on CUDA (train-cuda)
// within bf16-activations of the CPU's — and the KV-cache stress matrix passes on CUDA through the decode graph. The
// measured max |Δlogit| of each pair is printed (the defaults in tools/logit_diff.h come from such runs).
#include <gtest/gtest.h>

#include <cstdio>
#include <map>

#include "model/qwen3_model.h"
#include "tokenizer/tokenizer.h"
#include "tools/parity.h"
#include "tools/stress_kv.h"
#include "tools/tools_test_util.h"

namespace nvfp4lm::test {
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
}  // namespace nvfp4lm::test
