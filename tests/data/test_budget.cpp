// DatasetOptions::token_budget (data/dataset.h, what calibration reads with): the samples are those of a read
// without it, as far as the budget reaches, and a huge text costs what its budgeted tokens cost (calibration on
// 64 MB of NUL bytes used 1.59 GB for 64 tokens).
#include <gtest/gtest.h>
#include <sys/resource.h>

#include "data/dataset.h"
#include "tokenizer/tokenizer_test_util.h"

namespace nvfp4lm::test_budget {
namespace {

using test::qwen3_tokenizer;

std::vector<int32_t> sample_tokens(const Dataset& dataset) {
  std::vector<int32_t> tokens;
  for (const Sample& sample : dataset.samples) tokens.insert(tokens.end(), sample.ids.begin(), sample.ids.end());
  return tokens;
}

TEST(DataBudget, SamplesAreThoseOfAnUnbudgetedReadAsFarAsTheBudgetReaches) {
  std::string text;
  for (int i = 0; i < 40; ++i)
    text += "Document " + std::to_string(i) + " says hello, 世界!\nIt has two lines.\n" + (i % 3 ? "\n" : "");
  for (const TextSplit split : {TextSplit::WholeFile, TextSplit::BlankLines}) {
    DatasetOptions options;
    options.text_split = split;
    options.max_tokens = 16;
    options.train_on_everything = true;
    const Dataset all = parse_dataset(text, "t.txt", DataFormat::Text, qwen3_tokenizer(), options);
    const std::vector<int32_t> all_tokens = sample_tokens(all);
    for (const int64_t budget : {1, 2, 15, 16, 17, 31, 100, 333, 100000}) {
      options.token_budget = budget;
      const Dataset some = parse_dataset(text, "t.txt", DataFormat::Text, qwen3_tokenizer(), options);
      const std::vector<int32_t> tokens = sample_tokens(some);
      const size_t needed = std::min(static_cast<size_t>(budget), all_tokens.size());
      ASSERT_GE(tokens.size(), needed) << "budget " << budget;
      EXPECT_TRUE(
          std::equal(all_tokens.begin(), all_tokens.begin() + static_cast<std::ptrdiff_t>(needed), tokens.begin()))
          << "budget " << budget;
      EXPECT_LE(some.samples.size(), all.samples.size());
    }
  }
}

long peak_rss_kib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

TEST(DataBudget, AHugeTextCostsWhatItsBudgetedTokensCost) {
  const std::string text(32u << 20, '\0');  // one pre-tokenizer piece
  DatasetOptions options;
  options.max_tokens = 16;
  options.train_on_everything = true;
  options.token_budget = 64;
  const long before = peak_rss_kib();
  const Dataset dataset = parse_dataset(text, "zeros.txt", DataFormat::Text, qwen3_tokenizer(), options);
  const long grown_mib = (peak_rss_kib() - before) / 1024;
  EXPECT_GE(sample_tokens(dataset).size(), 64u);
  // The document's text is copied once (32 MiB); merging the piece whole took ~24 bytes a byte (768 MiB).
  EXPECT_LT(grown_mib, 96) << "peak RSS grew by " << grown_mib << " MiB for 64 tokens";
}

}  // namespace
}  // namespace nvfp4lm::test_budget
