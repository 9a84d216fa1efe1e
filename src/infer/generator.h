// The generation loop: prefill the prompt through the KV cache in one forward pass, then one token at a time
// until an end-of-sequence token, a stop string, the token budget or the end of the context. Text is decoded
// incrementally (tokenizer/streaming_decoder.h: whole UTF-8 characters only) and passed to a callback as it
// comes, minus anything held back by a stop string (stop_conditions.h).
//
// Context guard: the prompt must fit the cache; max_new_tokens is capped so that every token fed back fits
// (the last generated token is never fed, so a cache of C tokens holding P allows C - P + 1 new ones); the cap
// is logged as a warning naming the numbers, and the result says StopReason::ContextFull when it bound.
//
// Timing (GenerationStats): prefill = the prompt's forward pass (with the first token's choice when the model
// chooses it, TokenChoicePlace); time to first token = from the call to the
// first sampled token (prefill + sampling); decode = every later step (forward of one token + sampling), so
// decode tokens/s = decode steps / decode seconds, as llama.cpp reports "eval". Peak memory is the device's
// MemoryTracker peak and the process's peak RSS at the end of the call.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "infer/cached_lm.h"
#include "infer/sampler.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm {

// Where the next token is chosen. Host: Sampler (sampler.h) on a CPU copy of the logits — Hugging Face semantics,
// every option. Model: CachedLm::append_choose where the logits live (ops/sampling.h: the same distribution, not
// draw for draw; no logit bias, repetition / presence / frequency penalty or min-p) — an Error when the model or the
// settings do not allow it.
// Auto: Model when the model runs on CUDA and the settings allow it, else Host.
enum class TokenChoicePlace { Auto, Host, Model };

struct GenerationOptions {
  int64_t max_new_tokens = 512;
  SamplingOptions sampling;
  std::vector<int32_t> eos_ids;  // end_of_sequence_ids() (stop_conditions.h)
  std::vector<std::string> stop_strings;
  bool skip_special = true;  // special tokens other than EOS (e.g. a stray <|im_start|>) are not shown
  TokenChoicePlace token_choice = TokenChoicePlace::Auto;
  // Called for each chosen token with the row of logits it was chosen from (vocab_size() raw values, before any
  // sampling modifier; valid during the call), e.g. for logprobs (logprobs.h). It needs the logits on the host:
  // with it, Auto chooses tokens there and Model is an Error. Its time is not counted in the statistics.
  std::function<void(int32_t token, std::span<const float> logits)> on_token;
};

enum class StopReason { EndOfSequence, StopString, MaxTokens, ContextFull };
const char* stop_reason_name(StopReason reason);  // "eos", "stop string", "max tokens", "context full"

struct GenerationStats {
  int64_t prompt_tokens = 0;     // tokens run in the prefill (for a chat turn: those not already cached)
  int64_t cached_tokens = 0;     // tokens already in the cache before the call
  int64_t generated_tokens = 0;  // sampled tokens, the end-of-sequence token included
  int64_t decode_steps = 0;      // single-token forward passes
  double prefill_seconds = 0;
  double time_to_first_token_seconds = 0;
  double decode_seconds = 0;
  size_t peak_device_bytes = 0;  // MemoryTracker peak of the model's device
  size_t peak_rss_bytes = 0;

  double prefill_tokens_per_second() const { return prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0; }
  double decode_tokens_per_second() const { return decode_seconds > 0 ? decode_steps / decode_seconds : 0; }
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // every sampled token, the end-of-sequence token included when it ended the text
  std::string text;             // what was shown: decoded, without EOS, stop string or what followed it
  StopReason stop_reason = StopReason::MaxTokens;
  std::string stop_detail;  // the stop string, or the EOS token's text
  GenerationStats stats;
  bool chosen_by_model = false;  // tokens were chosen where the logits live (TokenChoicePlace)
};

// Receives each piece of text as soon as it is final (valid UTF-8, possibly several characters).
using TextCallback = std::function<void(std::string_view)>;

// "prompt 12 tokens, generated 40 tokens, prefill 310.2 tok/s, decode 25.4 tok/s, TTFT 0.041 s, peak memory
// 0.31 GiB (cpu tracker) / 0.52 GiB RSS"
std::string format_generation_stats(const GenerationStats& stats, Device device);

class Generator {
 public:
  // The sampler is seeded once here, so consecutive calls (chat turns) continue one random stream.
  Generator(CachedLm& lm, Tokenizer tokenizer, GenerationOptions options);

  // Runs `prompt` after whatever the cache holds and generates the answer. `prompt` must not be empty.
  GenerationResult generate(std::span<const int32_t> prompt, const TextCallback& on_text = {});

  CachedLm& lm() { return lm_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  const GenerationOptions& options() const { return options_; }
  GenerationOptions& options() { return options_; }

 private:
  // `generated`: this call's tokens so far (the presence and frequency penalties count them; the cache's tokens are
  // the repetition penalty's history).
  int32_t next_token(std::span<const float> logits, std::span<const int32_t> generated);
  // Whether this call chooses tokens with CachedLm::append_choose (resolves TokenChoicePlace; Error for Model when
  // it cannot).
  bool choose_in_model() const;
  TokenChoice token_choice();

  CachedLm& lm_;
  Tokenizer tokenizer_;
  GenerationOptions options_;
  Sampler sampler_;
};

}  // namespace nvfp4lm
