// Evaluation windows: samples cut to the model's context the way a perplexity tool reads a long text (llama.cpp's
// perplexity, Hugging Face's "perplexity of fixed-length models"), as ordinary samples (sample.h) whose loss mask
// says which targets each window scores, so batches of them are built and scored like training batches (batch.h).
//
// A sample of n <= seq_len tokens is one window, its mask unchanged. A longer one is read by windows of seq_len
// tokens starting every `stride` tokens: window k holds tokens [k*stride, min(k*stride + seq_len, n)), the last
// one ends at n. Each window scores only the tokens the previous window did not score, with every earlier token
// of the window as context: token j (1 <= j < n) is scored by the first window that contains it, so it is scored
// exactly once, after at least seq_len - stride tokens of context once the first window is past. stride must be in
// [1, seq_len - 1] (stride seq_len - 1 reproduces the training split of dataset.h: pieces overlapping by one
// token, every token predicted from its own piece only). The sample's own mask still applies (chat data scores
// only assistant tokens); windows that end up scoring nothing are dropped.
//
// max_scored_tokens (> 0) stops after that many scored tokens, in sample order: the window holding the last one is
// cut right after it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "data/sample.h"

namespace nvfp4lm {

struct EvalWindowOptions {
  int64_t seq_len = 512;
  int64_t stride = 256;
  int64_t max_scored_tokens = 0;  // 0: every token
};

struct EvalWindows {
  std::vector<Sample> windows;  // in sample order
  int64_t scored_tokens = 0;    // targets the windows score (trained_token_count summed)
  int64_t window_tokens = 0;    // tokens the model runs (context included)
  int64_t samples_read = 0;     // samples that contributed a window
  int64_t long_samples = 0;     // samples longer than seq_len (read by sliding windows)
  bool stopped_early = false;   // max_scored_tokens was reached before the end of the data
};

// Error when seq_len < 2 or stride is outside [1, seq_len - 1].
EvalWindows make_eval_windows(std::span<const Sample> samples, const EvalWindowOptions& options);

}  // namespace nvfp4lm
