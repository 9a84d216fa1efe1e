// Slow (label "slow"): the streaming claim at full size. synth writes an 8 GB Qwen3-4B-shaped BF16 model, then
// `quantize --format modelopt` must finish with a peak RSS far below the model size (under 3 GiB), and the result
// must hold every weight of Qwen3-4B. Needs ~11 GB of free disk under the temp directory and a few minutes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "common/test_util.h"

namespace nvfp4lm::test::slow_quantize_memory {
namespace {

double peak_rss_gib(const std::string& output) {
  std::smatch match;
  const std::regex pattern("peak RSS ([0-9.]+) GiB");
  EXPECT_TRUE(std::regex_search(output, match, pattern)) << output;
  return match.size() > 1 ? std::stod(match[1]) : 1e9;
}

TEST(SlowQuantize, Qwen3_4BStreamsInBoundedMemory) {
  TempDir dir;
  const std::string model = quoted(dir / "q4b"), out = quoted(dir / "q4b-nvfp4");
  const CliResult synth = run_cli("synth --preset qwen3-4b " + model);
  ASSERT_EQ(synth.exit_code, 0) << synth.err;
  EXPECT_LT(peak_rss_gib(synth.out), 1.0) << synth.out;

  const CliResult quantize = run_cli("quantize " + model + " " + out + " --format modelopt");
  ASSERT_EQ(quantize.exit_code, 0) << quantize.err;
  const double rss = peak_rss_gib(quantize.out);
  EXPECT_LT(rss, 3.0) << quantize.out.substr(quantize.out.size() > 400 ? quantize.out.size() - 400 : 0);
  std::printf("qwen3-4b quantize: %s", quantize.out.substr(quantize.out.rfind("total relative")).c_str());

  const CliResult info = run_cli("info " + out + " --json");
  ASSERT_EQ(info.exit_code, 0) << info.err;
  const auto json = nlohmann::json::parse(info.out);
  EXPECT_EQ(json["parameters"]["total"], 4022468096);
  int nvfp4 = 0;
  for (const auto& tensor : json["tensors"]) nvfp4 += tensor["nvfp4"].get<bool>();
  EXPECT_EQ(nvfp4, 36 * 7);
}

}  // namespace
}  // namespace nvfp4lm::test::slow_quantize_memory
