// Sampler: each logits transform against its direct formula (HF semantics; OpenAI's for logit bias and the presence
// and frequency penalties, in vLLM's order), greedy equivalences, determinism for a seed, and the drawn tokens'
// frequencies against the distribution (chi-square).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "common/test_util.h"
#include "core/error.h"
#include "infer/sampler.h"

namespace nvfp4lm::test::test_sampler {
namespace {

std::vector<float> random_logits(size_t vocab, Rng& rng, float scale = 2.0f) {
  std::vector<float> logits(vocab);
  for (auto& value : logits) value = rng.normal() * scale;
  return logits;
}

// HF's warpers written the way transformers does them (softmax, sort ascending, cumulative sums), as the
// reference for sampling_distribution. Returns a probability per id (0 for removed ids).
std::vector<double> reference_distribution(const std::vector<float>& logits, const SamplingOptions& o) {
  const size_t vocab = logits.size();
  std::vector<double> scores(vocab);
  for (size_t i = 0; i < vocab; ++i) scores[i] = logits[i] / static_cast<double>(o.temperature);
  const double removed = -std::numeric_limits<double>::infinity();
  if (o.top_k > 0 && static_cast<size_t>(o.top_k) < vocab) {
    std::vector<double> sorted = scores;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    const double kth = sorted[static_cast<size_t>(o.top_k) - 1];
    for (auto& s : scores)
      if (s < kth) s = removed;
  }
  auto softmax = [&](const std::vector<double>& s) {
    const double top = *std::max_element(s.begin(), s.end());
    std::vector<double> p(vocab);
    double sum = 0;
    for (size_t i = 0; i < vocab; ++i) sum += p[i] = std::exp(s[i] - top);
    for (auto& v : p) v /= sum;
    return p;
  };
  if (o.top_p < 1.0f) {
    std::vector<double> probs = softmax(scores);
    std::vector<size_t> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    // ascending probability; among equal ones the higher id first, so the lower id is "more likely"
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return probs[a] < probs[b] || (probs[a] == probs[b] && a > b); });
    double cumulative = 0;
    for (size_t r = 0; r < vocab; ++r) {
      cumulative += probs[order[r]];
      if (cumulative <= 1.0 - o.top_p && r + 1 < vocab) scores[order[r]] = removed;
    }
  }
  if (o.min_p > 0.0f) {
    std::vector<double> probs = softmax(scores);
    const double top = *std::max_element(probs.begin(), probs.end());
    for (size_t i = 0; i < vocab; ++i)
      if (probs[i] < o.min_p * top) scores[i] = removed;
  }
  return softmax(scores);
}

std::vector<double> dense(const std::vector<TokenProbability>& tokens, size_t vocab) {
  std::vector<double> p(vocab, 0.0);
  for (const auto& t : tokens) p[static_cast<size_t>(t.id)] += t.probability;
  return p;
}

void expect_distribution(const std::vector<float>& logits, const SamplingOptions& options, const std::string& what) {
  const std::vector<double> expected = reference_distribution(logits, options);
  const std::vector<double> actual = dense(sampling_distribution(logits, options), logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    // The support must match exactly; probabilities to double rounding.
    ASSERT_EQ(actual[i] > 0, expected[i] > 0) << what << ": token " << i;
    ASSERT_NEAR(actual[i], expected[i], 1e-9) << what << ": token " << i;
  }
}

TEST(Sampler, RepetitionPenaltyIsHfFormula) {
  std::vector<float> logits = {2.0f, -1.0f, 0.0f, 3.0f, -4.0f, 1.5f};
  const std::vector<int32_t> seen = {0, 1, 1, 2, 4, 0};  // duplicates are penalized once
  apply_repetition_penalty(logits, seen, 2.0f);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -2.0f, 0.0f, 3.0f, -8.0f, 1.5f}));
  std::vector<float> unchanged = {1.0f, -1.0f};
  apply_repetition_penalty(unchanged, std::vector<int32_t>{0, 1}, 1.0f);
  EXPECT_EQ(unchanged, (std::vector<float>{1.0f, -1.0f}));
}

TEST(Sampler, LogitBiasIsAddedToTheRawLogits) {
  std::vector<float> logits = {2.0f, -1.0f, 0.0f, 3.0f};
  const std::vector<std::pair<int32_t, float>> bias = {{0, -0.5f}, {2, 1.25f}, {3, -100.0f}};
  apply_logit_bias(logits, bias);
  EXPECT_EQ(logits, (std::vector<float>{1.5f, -1.0f, 1.25f, -97.0f}));
  const std::vector<std::pair<int32_t, float>> outside = {{4, 1.0f}};
  expect_error([&] { apply_logit_bias(logits, outside); }, {"logit_bias", "token id 4", "[0, 4)"});
}

TEST(Sampler, PresenceAndFrequencyPenaltiesAreOpenAiFormula) {
  std::vector<float> logits = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f};
  // Token 1 three times, token 3 once: logit -= 0.25 * count + 0.5 * (count > 0).
  const std::vector<int32_t> generated = {1, 3, 1, 1};
  apply_presence_frequency_penalties(logits, generated, 0.5f, 0.25f);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, 0.75f, 3.0f, 3.25f, 5.0f}));
  // Negative values encourage repetition.
  std::vector<float> encouraged = {1.0f, 2.0f};
  apply_presence_frequency_penalties(encouraged, std::vector<int32_t>{0, 0}, -1.0f, -0.5f);
  EXPECT_EQ(encouraged, (std::vector<float>{3.0f, 2.0f}));
  std::vector<float> unchanged = {1.0f, 2.0f};
  apply_presence_frequency_penalties(unchanged, std::vector<int32_t>{0, 1}, 0.0f, 0.0f);
  EXPECT_EQ(unchanged, (std::vector<float>{1.0f, 2.0f}));
}

TEST(Sampler, GreedyFollowsBiasAndPenalties) {
  const std::vector<float> logits = {3.0f, 2.5f, -1.0f};
  auto greedy = [&](auto change, std::span<const int32_t> seen, std::span<const int32_t> generated) {
    SamplingOptions options;
    options.temperature = 0;
    change(options);
    Sampler sampler(options);
    return sampler.sample(logits, seen, generated);
  };
  const std::vector<int32_t> none, once = {0}, twice = {0, 0}, four = {0, 0, 0, 0};
  EXPECT_EQ(greedy([](SamplingOptions&) {}, none, none), 0);
  // A bias of 1 lifts token 1 to 3.5; one of 0.4 leaves it at 2.9.
  EXPECT_EQ(greedy([](SamplingOptions& o) { o.logit_bias = {{1, 1.0f}}; }, none, none), 1);
  EXPECT_EQ(greedy([](SamplingOptions& o) { o.logit_bias = {{1, 0.4f}}; }, none, none), 0);
  // Frequency 0.3: one 0 generated leaves it at 2.7 (> 2.5), two bring it to 2.4.
  auto frequency = [](SamplingOptions& o) { o.frequency_penalty = 0.3f; };
  EXPECT_EQ(greedy(frequency, once, once), 0);
  EXPECT_EQ(greedy(frequency, twice, twice), 1);
  // Only generated tokens count: four 0s in the prompt (seen, not generated) change nothing.
  EXPECT_EQ(greedy(frequency, four, none), 0);
  // Presence 0.4 counts a token once: four 0s leave it at 2.6; presence 0.6 brings it to 2.4.
  EXPECT_EQ(greedy([](SamplingOptions& o) { o.presence_penalty = 0.4f; }, four, four), 0);
  EXPECT_EQ(greedy([](SamplingOptions& o) { o.presence_penalty = 0.6f; }, once, once), 1);
}

TEST(Sampler, BiasThenRepetitionThenPresenceAsVllm) {
  // Token 0: 2 + 2 (bias) = 4, / 2 (repetition) = 2, - 1.5 (presence) = 0.5 < 1 -> token 1 wins. Presence before
  // the repetition penalty would give (4 - 1.5) / 2 = 1.25 and keep token 0.
  SamplingOptions options;
  options.temperature = 0;
  options.logit_bias = {{0, 2.0f}};
  options.repetition_penalty = 2.0f;
  options.presence_penalty = 1.5f;
  Sampler sampler(options);
  const std::vector<int32_t> history = {0};
  EXPECT_EQ(sampler.sample(std::vector<float>{2.0f, 1.0f}, history, history), 1);
}

TEST(Sampler, LogitBiasBansAndForcesTokensWhenSampling) {
  SamplingOptions options;
  options.temperature = 1.0f;
  options.top_k = 0;
  options.top_p = 1.0f;
  options.seed = 3;
  const std::vector<float> flat(6, 0.0f);
  options.logit_bias = {{2, -100.0f}};
  Sampler banned(options);
  std::set<int32_t> drawn;
  for (int i = 0; i < 2000; ++i) drawn.insert(banned.sample(flat));
  EXPECT_EQ(drawn, (std::set<int32_t>{0, 1, 3, 4, 5}));
  options.logit_bias = {{4, 100.0f}};
  Sampler forced(options);
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(forced.sample(flat), 4);
  // Through sample_decodable: a bias cannot bring back a padded row.
  options.logit_bias = {{5, 100.0f}};
  Sampler padded(options);
  for (int i = 0; i < 200; ++i) ASSERT_LT(padded.sample_decodable(flat, 5), 5);
}

TEST(Sampler, OffOptionsLeaveTheTokensAsBefore) {
  // With no bias and zero penalties the row is used as given: the same seed draws the same tokens whatever history
  // is passed, and those of a sampler that is given none (the call every earlier caller made).
  Rng rng(8);
  std::vector<std::vector<float>> rows;
  for (int i = 0; i < 200; ++i) rows.push_back(random_logits(64, rng, 1.0f));
  SamplingOptions options;
  options.seed = 5;
  EXPECT_FALSE(options.modifies_logits());
  Sampler plain(options), with_history(options);
  std::vector<int32_t> history;
  for (const auto& row : rows) {
    const int32_t token = plain.sample(row);
    ASSERT_EQ(with_history.sample(row, history, history), token);
    history.push_back(token);
  }
  // A penalty or bias that is present but changes nothing still draws the same tokens (the copied row is equal).
  options.logit_bias = {{3, 0.0f}};
  EXPECT_TRUE(options.modifies_logits());
  SamplingOptions off;
  off.seed = 5;
  Sampler neutral(options), reference(off);
  for (const auto& row : rows) ASSERT_EQ(neutral.sample(row, history, history), reference.sample(row));
}

TEST(Sampler, GreedyIsArgmaxOfPenalizedLogits) {
  Rng rng(1);
  SamplingOptions options;
  options.temperature = 0;
  for (int trial = 0; trial < 20; ++trial) {
    const std::vector<float> logits = random_logits(1000, rng);
    Sampler sampler(options);
    const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
    EXPECT_EQ(sampler.sample(logits), best);
  }
  // The penalty can move the argmax: token 0 leads until it is penalized.
  options.repetition_penalty = 1.5f;
  Sampler sampler(options);
  const std::vector<float> logits = {3.0f, 2.5f, -1.0f};
  EXPECT_EQ(sampler.sample(logits), 0);
  EXPECT_EQ(sampler.sample(logits, std::vector<int32_t>{0}), 1);
}

TEST(Sampler, ArgmaxTiesAndBadLogits) {
  EXPECT_EQ(argmax_logit(std::vector<float>{1.0f, 5.0f, 5.0f, 2.0f}), 1);
  EXPECT_THROW(argmax_logit(std::vector<float>{1.0f, NAN}), Error);
  const float ninf = -std::numeric_limits<float>::infinity();
  EXPECT_THROW(argmax_logit(std::vector<float>{ninf, ninf}), Error);
  EXPECT_EQ(argmax_logit(std::vector<float>{ninf, -3.0f}), 1);
}

TEST(Sampler, TemperatureToZeroIsGreedy) {
  Rng rng(2);
  SamplingOptions options;
  options.temperature = 1e-4f;
  options.top_k = 0;
  options.top_p = 1.0f;
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> logits = random_logits(500, rng);
    const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
    logits[static_cast<size_t>(best)] += 0.01f;  // a gap of at least 0.01: probability ratio e^-100 at T=1e-4
    options.seed = static_cast<uint64_t>(trial);
    Sampler sampler(options);
    EXPECT_EQ(sampler.sample(logits), best);
  }
}

TEST(Sampler, DistributionMatchesHfFormulas) {
  Rng rng(3);
  struct Case {
    float temperature;
    int64_t top_k;
    float top_p;
    float min_p;
  };
  const Case cases[] = {{1.0f, 0, 1.0f, 0.0f}, {0.7f, 0, 1.0f, 0.0f}, {1.3f, 7, 1.0f, 0.0f},  {0.8f, 0, 0.9f, 0.0f},
                        {0.8f, 0, 0.3f, 0.0f}, {1.0f, 0, 1.0f, 0.1f}, {0.7f, 20, 0.8f, 0.0f}, {0.9f, 50, 0.95f, 0.05f},
                        {2.0f, 3, 0.5f, 0.5f}, {0.5f, 1, 1.0f, 0.0f}, {1.0f, 0, 0.05f, 0.0f}};
  for (const Case& c : cases) {
    SamplingOptions options;
    options.temperature = c.temperature;
    options.top_k = c.top_k;
    options.top_p = c.top_p;
    options.min_p = c.min_p;
    for (size_t vocab : {1u, 2u, 13u, 300u}) {
      const std::vector<float> logits = random_logits(vocab, rng);
      expect_distribution(logits, options, options.describe() + " vocab " + std::to_string(vocab));
    }
  }
}

TEST(Sampler, TopKKeepsTiesAtTheBoundary) {
  SamplingOptions options;
  options.temperature = 1.0f;
  options.top_k = 2;
  options.top_p = 1.0f;
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 2.0f, 0.5f};
  const auto tokens = sampling_distribution(logits, options);
  ASSERT_EQ(tokens.size(), 3u);
  EXPECT_EQ(tokens[0].id, 1);  // most likely first, ties by id
  EXPECT_EQ(tokens[1].id, 2);
  EXPECT_EQ(tokens[2].id, 3);
}

TEST(Sampler, TopPOverALargeVocabularyWithoutTopK) {
  // Flat logits over a Qwen3-sized vocabulary: top-p needs thousands of tokens, so the sorted prefix must grow.
  Rng rng(4);
  const std::vector<float> logits = random_logits(151936, rng, 0.5f);
  SamplingOptions options;
  options.temperature = 1.0f;
  options.top_k = 0;
  options.top_p = 0.9f;
  const auto tokens = sampling_distribution(logits, options);
  EXPECT_GT(tokens.size(), 10000u);
  expect_distribution(logits, options, "top-p 0.9, vocab 151936");
}

TEST(Sampler, TopKNeverSamplesOutsideTheKBest) {
  Rng rng(5);
  const std::vector<float> logits = random_logits(1000, rng, 0.3f);  // flat: many tokens nearly as likely
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  const std::set<int32_t> best(order.begin(), order.begin() + 5);
  SamplingOptions options;
  options.temperature = 1.5f;
  options.top_k = 5;
  options.top_p = 1.0f;
  Sampler sampler(options);
  std::set<int32_t> drawn;
  for (int i = 0; i < 3000; ++i) {
    const int32_t id = sampler.sample(logits);
    ASSERT_TRUE(best.count(id)) << "drew token " << id << " outside the top 5";
    drawn.insert(id);
  }
  EXPECT_EQ(drawn.size(), 5u);
}

TEST(Sampler, SampleFrequenciesMatchTheDistribution) {
  Rng rng(6);
  const std::vector<float> logits = random_logits(12, rng, 1.0f);
  SamplingOptions options;
  options.temperature = 0.8f;
  options.top_k = 0;
  options.top_p = 0.97f;
  options.seed = 11;
  const auto tokens = sampling_distribution(logits, options);
  ASSERT_GE(tokens.size(), 4u);
  Sampler sampler(options);
  const int draws = 40000;
  std::map<int32_t, int> counts;
  for (int i = 0; i < draws; ++i) ++counts[sampler.sample(logits)];
  double chi_square = 0;
  for (const auto& t : tokens) {
    const double expected = draws * t.probability;
    const double diff = counts[t.id] - expected;
    chi_square += diff * diff / expected;
    counts.erase(t.id);
  }
  EXPECT_TRUE(counts.empty()) << "drew a token outside the distribution";
  // df = support - 1 <= 11; P(chi2_11 > 35) ~ 2.5e-4.
  EXPECT_LT(chi_square, 35.0) << "support " << tokens.size();
}

TEST(Sampler, SameSeedSameTokens) {
  Rng rng(7);
  std::vector<std::vector<float>> rows;
  for (int i = 0; i < 200; ++i) rows.push_back(random_logits(64, rng, 1.0f));
  SamplingOptions options;  // the defaults: temperature 0.7, top-k 20, top-p 0.8
  auto run = [&](uint64_t seed) {
    options.seed = seed;
    Sampler sampler(options);
    std::vector<int32_t> ids;
    for (const auto& row : rows) ids.push_back(sampler.sample(row));
    return ids;
  };
  EXPECT_EQ(run(1), run(1));
  EXPECT_NE(run(1), run(2));
}

TEST(Sampler, RejectsBadOptions) {
  auto bad = [](auto change, const std::string& flag) {
    SamplingOptions options;
    change(options);
    try {
      options.validate();
      ADD_FAILURE() << "accepted a bad " << flag;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(flag), std::string::npos) << e.what();
    }
  };
  bad([](SamplingOptions& o) { o.temperature = -1; }, "--temperature");
  bad([](SamplingOptions& o) { o.temperature = NAN; }, "--temperature");
  bad([](SamplingOptions& o) { o.top_k = -2; }, "--top-k");
  bad([](SamplingOptions& o) { o.top_p = 0; }, "--top-p");
  bad([](SamplingOptions& o) { o.top_p = 1.5f; }, "--top-p");
  bad([](SamplingOptions& o) { o.min_p = 1; }, "--min-p");
  bad([](SamplingOptions& o) { o.repetition_penalty = 0; }, "--repetition-penalty");
  bad([](SamplingOptions& o) { o.presence_penalty = 2.5f; }, "--presence-penalty");
  bad([](SamplingOptions& o) { o.presence_penalty = NAN; }, "--presence-penalty");
  bad([](SamplingOptions& o) { o.frequency_penalty = -2.1f; }, "--frequency-penalty");
  bad([](SamplingOptions& o) { o.logit_bias = {{5, 101.0f}}; }, "logit_bias");
  bad([](SamplingOptions& o) { o.logit_bias = {{-1, 1.0f}}; }, "logit_bias");
  bad([](SamplingOptions& o) { o.logit_bias = {{5, 1.0f}, {3, 1.0f}}; }, "logit_bias");
  bad([](SamplingOptions& o) { o.logit_bias = {{5, 1.0f}, {5, 2.0f}}; }, "logit_bias");
  SamplingOptions fine;
  EXPECT_NO_THROW(fine.validate());
  EXPECT_EQ(fine.describe(), "temperature 0.7, top-k 20, top-p 0.8, seed 0");
  fine.temperature = 0;
  EXPECT_EQ(fine.describe(), "greedy");
  fine.presence_penalty = -2.0f;
  fine.frequency_penalty = 2.0f;
  fine.logit_bias = {{1, -100.0f}, {7, 100.0f}};
  EXPECT_NO_THROW(fine.validate());
  EXPECT_EQ(fine.describe(), "greedy, presence penalty -2, frequency penalty 2, logit bias on 2 tokens");
}

}  // namespace
}  // namespace nvfp4lm::test::test_sampler
