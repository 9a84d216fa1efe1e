// See eval_windows.h for the window rule.
#include "data/eval_windows.h"

#include <algorithm>

#include "core/error.h"

namespace nvfp4lm {
namespace {

// The window [begin, end) of `sample`, scoring the sample's masked tokens j >= first_scored only.
Sample window_of(const Sample& sample, size_t begin, size_t end, size_t first_scored) {
  Sample window;
  window.source_line = sample.source_line;
  window.ids.assign(sample.ids.begin() + static_cast<std::ptrdiff_t>(begin),
                    sample.ids.begin() + static_cast<std::ptrdiff_t>(end));
  window.train_mask.assign(end - begin, 0);
  for (size_t j = std::max(begin + 1, first_scored); j < end; ++j) window.train_mask[j - begin] = sample.train_mask[j];
  return window;
}

}  // namespace

EvalWindows make_eval_windows(std::span<const Sample> samples, const EvalWindowOptions& options) {
  NVFP4LM_CHECK(options.seq_len >= 2, "evaluation windows: --seq-len {} is too short (at least 2 tokens)",
                options.seq_len);
  NVFP4LM_CHECK(options.stride >= 1 && options.stride <= options.seq_len - 1,
                "evaluation windows: --stride {} must be between 1 and --seq-len - 1 = {} (each window must score "
                "the token after the previous one's end)",
                options.stride, options.seq_len - 1);
  NVFP4LM_CHECK(options.max_scored_tokens >= 0, "evaluation windows: --max-tokens {} must be >= 0",
                options.max_scored_tokens);
  EvalWindows result;
  const auto seq_len = static_cast<size_t>(options.seq_len);
  const auto stride = static_cast<size_t>(options.stride);
  auto room = [&] {
    return options.max_scored_tokens == 0 ? INT64_MAX : options.max_scored_tokens - result.scored_tokens;
  };
  for (const Sample& sample : samples) {
    if (room() <= 0) {
      result.stopped_early = true;
      break;
    }
    const size_t n = sample.ids.size();
    NVFP4LM_ASSERT(sample.train_mask.size() == n, "sample from line {}: {} mask entries for {} ids", sample.source_line,
                   sample.train_mask.size(), n);
    if (n > seq_len) ++result.long_samples;
    bool contributed = false;
    size_t scored_until = 0;  // tokens below this were scored by an earlier window of this sample
    for (size_t begin = 0;; begin += stride) {
      const size_t end = std::min(begin + seq_len, n);
      Sample window = window_of(sample, begin, end, scored_until);
      scored_until = end;
      int64_t scored = trained_token_count(window);
      if (scored > room()) {
        // Keep the first room() scored tokens and nothing after the last of them.
        int64_t kept = 0;
        size_t cut = 0;
        for (size_t t = 1; t < window.ids.size(); ++t) {
          if (!window.train_mask[t]) continue;
          if (kept == room()) {
            window.train_mask[t] = 0;
          } else {
            ++kept;
            cut = t + 1;
          }
        }
        window.ids.resize(cut);
        window.train_mask.resize(cut);
        scored = kept;
        result.stopped_early = true;
      }
      if (scored > 0) {
        result.scored_tokens += scored;
        result.window_tokens += static_cast<int64_t>(window.ids.size());
        result.windows.push_back(std::move(window));
        contributed = true;
      }
      if (end == n || room() <= 0) break;
    }
    if (contributed) ++result.samples_read;
    if (room() <= 0 && scored_until < n) result.stopped_early = true;
  }
  return result;
}

}  // namespace nvfp4lm
