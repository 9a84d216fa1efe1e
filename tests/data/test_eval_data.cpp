// Evaluation data (data/eval_windows.h, eval_split.h): sliding windows score every maskable token of a long
// sample exactly once, each after the context the rule promises (checked against the closed form "token j is
// scored by window k = max(0, ceil((j + 1 - T) / S)), with the tokens [k*S, j) as context"); stride T - 1 gives
// the training split of dataset.h; the sample's own mask still applies; --max-tokens cuts exactly; bad settings are
// one-line errors. The held-out split takes every 1/F-th sample, floor(n * F) in all, and refuses empty sides.
#include <gtest/gtest.h>

#include <numeric>

#include "common/test_util.h"
#include "data/eval_split.h"
#include "data/eval_windows.h"

namespace nvfp4lm::test_eval_data {
namespace {

Sample counting_sample(int n, int first_id = 0) {
  Sample sample;
  for (int i = 0; i < n; ++i) sample.ids.push_back(first_id + i);
  sample.train_mask.assign(static_cast<size_t>(n), 1);
  sample.source_line = 7;
  return sample;
}

// For every scored token of every window: (absolute token, context begin), from the ids (= positions here).
std::vector<std::pair<int, int>> scored_tokens(const EvalWindows& windows) {
  std::vector<std::pair<int, int>> scored;
  for (const Sample& w : windows.windows)
    for (size_t t = 1; t < w.ids.size(); ++t)
      if (w.train_mask[t]) scored.emplace_back(w.ids[t], w.ids[0]);
  return scored;
}

TEST(EvalWindows, EachTokenOnceWithTheContextOfTheClosedForm) {
  for (const auto& [n, seq_len, stride] : std::vector<std::tuple<int, int, int>>{
           {100, 16, 8}, {100, 16, 15}, {100, 16, 1}, {17, 16, 5}, {16, 16, 8}, {5, 16, 8}, {61, 10, 3}}) {
    const std::vector<Sample> samples = {counting_sample(n)};
    const EvalWindows windows = make_eval_windows(samples, {seq_len, stride, 0});
    const auto scored = scored_tokens(windows);
    ASSERT_EQ(static_cast<int>(scored.size()), n - 1) << n << "/" << seq_len << "/" << stride;
    EXPECT_EQ(windows.scored_tokens, n - 1);
    for (int j = 1; j < n; ++j) {
      EXPECT_EQ(scored[static_cast<size_t>(j - 1)].first, j);
      const int k = j + 1 - seq_len <= 0 ? 0 : (j + 1 - seq_len + stride - 1) / stride;
      EXPECT_EQ(scored[static_cast<size_t>(j - 1)].second, k * stride)
          << "token " << j << " of " << n << ", seq_len " << seq_len << ", stride " << stride;
    }
    for (const Sample& w : windows.windows) EXPECT_LE(static_cast<int>(w.ids.size()), seq_len);
    EXPECT_EQ(windows.long_samples, n > seq_len ? 1 : 0);
  }
}

TEST(EvalWindows, StrideOfSeqLenMinusOneIsTheTrainingSplit) {
  // dataset.h cuts a long document into pieces of T tokens starting at the previous piece's last token.
  const int n = 50, seq_len = 12;
  const std::vector<Sample> samples = {counting_sample(n)};
  const EvalWindows windows = make_eval_windows(samples, {seq_len, seq_len - 1, 0});
  size_t begin = 0;
  for (const Sample& w : windows.windows) {
    EXPECT_EQ(static_cast<size_t>(w.ids[0]), begin);
    for (size_t t = 1; t < w.ids.size(); ++t) EXPECT_EQ(w.train_mask[t], 1);
    begin += seq_len - 1;
  }
  EXPECT_GE(begin + 1, static_cast<size_t>(n));
}

TEST(EvalWindows, KeepsTheSampleMaskAndDropsWindowsWithNothingToScore) {
  Sample chat = counting_sample(40);
  std::fill(chat.train_mask.begin(), chat.train_mask.begin() + 30, 0);  // only tokens 30..39 are scored
  const std::vector<Sample> samples = {chat};
  const EvalWindows windows = make_eval_windows(samples, {10, 5, 0});
  const auto scored = scored_tokens(windows);
  ASSERT_EQ(scored.size(), 10u);
  for (size_t i = 0; i < scored.size(); ++i) EXPECT_EQ(scored[i].first, static_cast<int>(30 + i));
  for (const Sample& w : windows.windows) EXPECT_GT(trained_token_count(w), 0);
}

TEST(EvalWindows, MaxTokensStopsExactlyAfterThatManyScoredTokens) {
  const std::vector<Sample> samples = {counting_sample(30), counting_sample(30, 100)};
  const EvalWindows windows = make_eval_windows(samples, {8, 4, 33});
  EXPECT_EQ(windows.scored_tokens, 33);
  EXPECT_TRUE(windows.stopped_early);
  const auto scored = scored_tokens(windows);
  ASSERT_EQ(scored.size(), 33u);
  EXPECT_EQ(scored.back().first, 104);  // 29 of the first sample, then 101..104
  EXPECT_EQ(windows.windows.back().ids.back(), 104);
  const EvalWindows all = make_eval_windows(samples, {8, 4, 1000});
  EXPECT_FALSE(all.stopped_early);
  EXPECT_EQ(all.scored_tokens, 58);
}

TEST(EvalWindows, BadSettingsAreOneLineErrors) {
  const std::vector<Sample> samples = {counting_sample(10)};
  test::expect_error([&] { make_eval_windows(samples, {8, 8, 0}); }, {"--stride 8", "--seq-len - 1 = 7"});
  test::expect_error([&] { make_eval_windows(samples, {8, 0, 0}); }, {"--stride 0"});
  test::expect_error([&] { make_eval_windows(samples, {1, 1, 0}); }, {"--seq-len 1"});
}

TEST(EvalSplit, HoldsOutEveryOneOverFthSampleInFileOrder) {
  std::vector<Sample> samples;
  for (int i = 0; i < 100; ++i) samples.push_back(counting_sample(3, 10 * i));
  const std::vector<Sample> held = hold_out_samples(samples, 0.05);
  ASSERT_EQ(held.size(), 5u);
  ASSERT_EQ(samples.size(), 95u);
  for (size_t i = 0; i < held.size(); ++i) EXPECT_EQ(held[i].ids[0], static_cast<int>(10 * (20 * i + 19)));
  for (size_t i = 1; i < samples.size(); ++i) EXPECT_LT(samples[i - 1].ids[0], samples[i].ids[0]);

  std::vector<Sample> few = {counting_sample(3), counting_sample(3)};
  test::expect_error([&] { hold_out_samples(few, 0.05); }, {"--eval-split 0.05", "holds out none"});
  test::expect_error([&] { hold_out_samples(few, 0.9); }, {"--eval-split"});
}

}  // namespace
}  // namespace nvfp4lm::test_eval_data
