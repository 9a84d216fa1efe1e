// Helpers for the inference tests: the bundled Qwen3 tokenizer (loaded once) and FakeLm, a CachedLm whose
// logits are a function of the whole token history given by the test, recording how many tokens each forward
// call ran, so generation, stop conditions and KV-cache reuse can be checked without a model.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "common/test_util.h"
#include "infer/cached_lm.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_files.h"

namespace nvfp4lm::test {

inline const Tokenizer& qwen3_tokenizer() {
  static const Tokenizer tokenizer = Tokenizer::load(bundled_qwen3_tokenizer_dir());
  return tokenizer;
}

// logits(history, row): fill `row` (vocab values, zeroed) for the next token after `history`.
using LogitsFunction = std::function<void(std::span<const int32_t> history, std::span<float> row)>;

class FakeLm : public CachedLm {
 public:
  FakeLm(int64_t vocab, int64_t capacity, LogitsFunction logits)
      : vocab_(vocab), capacity_(capacity), logits_fn_(std::move(logits)), row_(static_cast<size_t>(vocab)) {}

  int64_t vocab_size() const override { return vocab_; }
  int64_t capacity() const override { return capacity_; }

  std::vector<int64_t> forward_sizes;  // tokens run by each forward call
  std::vector<int64_t> truncations;    // lengths passed to truncate
  std::vector<FedTokens> fed_kinds;    // what each forward call's ids were

 protected:
  std::span<const float> forward(std::span<const int32_t> ids, FedTokens fed) override {
    forward_sizes.push_back(static_cast<int64_t>(ids.size()));
    fed_kinds.push_back(fed);
    std::vector<int32_t> history(tokens().begin(), tokens().end());
    history.insert(history.end(), ids.begin(), ids.end());
    std::fill(row_.begin(), row_.end(), 0.0f);
    logits_fn_(history, row_);
    return row_;
  }
  void truncate_cache(int64_t length) override { truncations.push_back(length); }

 private:
  int64_t vocab_, capacity_;
  LogitsFunction logits_fn_;
  std::vector<float> row_;
};

// Logits that make greedy decoding follow `script` (then `after` forever), starting after `prompt_length`
// tokens of history.
inline LogitsFunction scripted_logits(std::vector<int32_t> script, size_t prompt_length, int32_t after) {
  return [script = std::move(script), prompt_length, after](std::span<const int32_t> history, std::span<float> row) {
    const size_t step = history.size() - prompt_length;
    row[static_cast<size_t>(step < script.size() ? script[step] : after)] = 10.0f;
  };
}

}  // namespace nvfp4lm::test
