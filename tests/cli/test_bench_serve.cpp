// `bench serve` end to end through the real executable on the tiny preset: the bounded load test finishes by itself
// with every request answered in both runs, and its JSON is consistent (all tokens generated, the batched run's
// batches larger than one, the one-at-a-time run's exactly one, the speedup the ratio of the two decode rates);
// without a model it is a one-line error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/test_util.h"

namespace nvfp4lm::test::test_bench_serve {
namespace {

TEST(CliBenchServe, BoundedLoadFinishesWithEveryRequestAnswered) {
  const CliResult result =
      run_cli("bench serve --preset tiny --requests 12 --concurrency 4 --prompt-len 8 --gen 6 --max-batch 4 --json -");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err.rfind("nvfp4lm bench serve: device cpu, compute path", 0), 0u) << result.err;
  const nlohmann::json json = nlohmann::json::parse(result.out);
  EXPECT_EQ(json["benchmark"], "serve");
  for (const char* run : {"batched", "sequential"}) {
    const nlohmann::json& r = json[run];
    EXPECT_EQ(r["requests"], 12) << run;
    EXPECT_EQ(r["failed"], 0) << run;
    EXPECT_EQ(r["generated_tokens"], 12 * 6) << run;  // a random tiny model does not hit its EOS token in 6
    EXPECT_GT(r["decode_tokens_per_second"].get<double>(), 0) << run;
    EXPECT_GT(r["wall_seconds"].get<double>(), 0) << run;
  }
  EXPECT_EQ(json["batched"]["max_batch"], 4);
  EXPECT_GT(json["batched"]["mean_batch"].get<double>(), 1.0);
  EXPECT_EQ(json["sequential"]["max_batch"], 1);
  EXPECT_EQ(json["sequential"]["mean_batch"].get<double>(), 1.0);
  EXPECT_NEAR(json["decode_speedup"].get<double>(),
              json["batched"]["decode_tokens_per_second"].get<double>() /
                  json["sequential"]["decode_tokens_per_second"].get<double>(),
              1e-9);
}

TEST(CliBenchServe, NeedsAModel) {
  const CliResult result = run_cli("bench serve --requests 2");
  expect_one_line_error(result, {"exactly one of --model M and --preset"});
}

}  // namespace
}  // namespace nvfp4lm::test::test_bench_serve
