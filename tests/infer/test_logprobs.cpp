// next_token_logprobs (infer/logprobs.h): log_softmax over the candidate ids against a direct formula, the top-k
// order (ties by id, so the first is argmax_logit's pick), padded ids left out, and errors for bad arguments and
// broken logits; next_token_entropy against -sum p log p written out.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "common/test_util.h"
#include "infer/logprobs.h"
#include "infer/sampler.h"

namespace nvfp4lm::test::test_logprobs {
namespace {

TEST(Logprobs, LogSoftmaxOverTheCandidates) {
  Rng rng(7);
  std::vector<float> logits(300);
  for (float& x : logits) x = rng.uniform() * 20.0f - 10.0f;
  logits[299] = 100.0f;  // a padded id: not a token, so it must not count
  const int64_t candidates = 290;
  double sum = 0;
  for (int64_t i = 0; i < candidates; ++i) sum += std::exp(static_cast<double>(logits[static_cast<size_t>(i)]));
  const NextTokenLogprobs result = next_token_logprobs(logits, candidates, 17, 5);
  EXPECT_EQ(result.chosen.id, 17);
  EXPECT_NEAR(result.chosen.logprob, logits[17] - std::log(sum), 1e-9);
  ASSERT_EQ(result.top.size(), 5u);
  const std::vector<float> row(logits.begin(), logits.begin() + candidates);
  EXPECT_EQ(result.top.front().id, argmax_logit(row)) << "the top token is the greedy choice";
  for (size_t i = 0; i < result.top.size(); ++i) {
    EXPECT_LE(result.top[i].logprob, 0);
    EXPECT_LT(result.top[i].id, candidates);
    EXPECT_NEAR(result.top[i].logprob, logits[static_cast<size_t>(result.top[i].id)] - std::log(sum), 1e-9);
    if (i > 0) {
      EXPECT_GE(result.top[i - 1].logprob, result.top[i].logprob);
    }
  }
  double total = 0;
  for (int32_t id = 0; id < candidates; ++id)
    total += std::exp(next_token_logprobs(logits, candidates, id, 0).chosen.logprob);
  EXPECT_NEAR(total, 1.0, 1e-9);
}

TEST(Logprobs, TiesGoToTheLowerIdAndKIsCapped) {
  const std::vector<float> logits = {1, 3, 3, 2};
  const NextTokenLogprobs result = next_token_logprobs(logits, 4, 0, 10);
  ASSERT_EQ(result.top.size(), 4u);
  EXPECT_EQ(result.top[0].id, 1);
  EXPECT_EQ(result.top[1].id, 2);
  EXPECT_EQ(result.top[2].id, 3);
  EXPECT_EQ(result.top[3].id, 0);
  EXPECT_DOUBLE_EQ(result.top[0].logprob, result.top[1].logprob);
  EXPECT_TRUE(next_token_logprobs(logits, 4, 0, 0).top.empty());
  const std::vector<float> masked = {0, -std::numeric_limits<float>::infinity()};
  EXPECT_EQ(next_token_logprobs(masked, 2, 1, 0).chosen.logprob, -std::numeric_limits<double>::infinity());
}

TEST(Logprobs, EntropyIsMinusSumPLogPAtTheTemperature) {
  Rng rng(11);
  std::vector<float> logits(300);
  for (float& x : logits) x = rng.uniform() * 20.0f - 10.0f;
  logits[299] = 100.0f;  // a padded id, left out
  const int64_t candidates = 290;
  for (double temperature : {1.0, 0.5, 2.0}) {
    double z = 0;
    for (int64_t i = 0; i < candidates; ++i) z += std::exp(logits[static_cast<size_t>(i)] / temperature);
    double entropy = 0;
    for (int64_t i = 0; i < candidates; ++i) {
      const double p = std::exp(logits[static_cast<size_t>(i)] / temperature) / z;
      entropy -= p * std::log(p);
    }
    EXPECT_NEAR(next_token_entropy(logits, candidates, temperature), entropy, 1e-9) << "temperature " << temperature;
  }
  EXPECT_EQ(next_token_entropy(logits, candidates, 0), next_token_entropy(logits, candidates, 1)) << "greedy: T = 1";
  const std::vector<float> uniform(64, 3.5f);
  EXPECT_NEAR(next_token_entropy(uniform, 64, 1), std::log(64.0), 1e-12);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> certain = {-inf, 2.0f, -inf};
  EXPECT_EQ(next_token_entropy(certain, 3, 1), 0.0);
  EXPECT_THROW(next_token_entropy(certain, 4, 1), Error);
  EXPECT_THROW(next_token_entropy(std::vector<float>{1, NAN}, 2, 1), Error);
}

TEST(Logprobs, BadArgumentsAndBrokenLogitsAreErrors) {
  const std::vector<float> logits = {1, 2, 3};
  expect_error([&] { next_token_logprobs(logits, 3, 3, 0); }, {"token 3"});
  expect_error([&] { next_token_logprobs(logits, 3, -1, 0); }, {"token -1"});
  expect_error([&] { next_token_logprobs(logits, 4, 0, 0); }, {"4 candidate"});
  expect_error([&] { next_token_logprobs(logits, 3, 0, -1); }, {">= 0"});
  const std::vector<float> nan = {1, std::numeric_limits<float>::quiet_NaN(), 3};
  expect_error([&] { next_token_logprobs(nan, 3, 0, 1); }, {"NaN"});
}

}  // namespace
}  // namespace nvfp4lm::test::test_logprobs
