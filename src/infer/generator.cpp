// See generator.h.
#include "infer/generator.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "core/error.h"
#include "core/logging.h"
#include "core/memory.h"
#include "core/stopwatch.h"
#include "infer/answer_stream.h"

namespace nvfp4lm {

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::EndOfSequence:
      return "eos";
    case StopReason::StopString:
      return "stop string";
    case StopReason::MaxTokens:
      return "max tokens";
    case StopReason::ContextFull:
      return "context full";
  }
  return "?";
}

std::string format_generation_stats(const GenerationStats& stats, Device device) {
  std::string prompt = fmt::format("prompt {} tokens", stats.prompt_tokens);
  if (stats.cached_tokens > 0) prompt += fmt::format(" (+{} cached)", stats.cached_tokens);
  const std::string decode = stats.decode_steps > 0 ? fmt::format("{:.1f} tok/s", stats.decode_tokens_per_second())
                                                    : std::string("n/a (no decode step)");
  return fmt::format(
      "{}, generated {} tokens, prefill {:.1f} tok/s, decode {}, time to first token {:.3f} s, peak memory {:.3f} "
      "GiB ({} tracker) / {:.3f} GiB RSS",
      prompt, stats.generated_tokens, stats.prefill_tokens_per_second(), decode, stats.time_to_first_token_seconds,
      to_gib(stats.peak_device_bytes), device.label(), to_gib(stats.peak_rss_bytes));
}

Generator::Generator(CachedLm& lm, Tokenizer tokenizer, GenerationOptions options)
    : lm_(lm), tokenizer_(std::move(tokenizer)), options_(std::move(options)), sampler_(options_.sampling) {}

int32_t Generator::next_token(std::span<const float> logits, std::span<const int32_t> generated) {
  return sampler_.sample_decodable(logits, tokenizer_.vocab_size(), lm_.tokens(), generated);
}

bool Generator::choose_in_model() const {
  const SamplingOptions& sampling = options_.sampling;
  // The model's sampler has temperature, top-k and top-p only.
  const bool settings_allow = !sampling.modifies_logits() && sampling.min_p == 0.0f;
  switch (options_.token_choice) {
    case TokenChoicePlace::Host:
      return false;
    case TokenChoicePlace::Model:
      NVFP4LM_CHECK(lm_.can_choose(), "choosing tokens in the model: this model cannot (use the host sampler)");
      NVFP4LM_CHECK(!options_.on_token,
                    "choosing tokens in the model: the logits stay there, but a token callback (logprobs) needs them "
                    "on the host");
      NVFP4LM_CHECK(settings_allow,
                    "choosing tokens in the model: --repetition-penalty, --presence-penalty, --frequency-penalty, "
                    "logit bias and --min-p need the host sampler");
      return true;
    case TokenChoicePlace::Auto:
      return lm_.prefers_choosing() && settings_allow && !options_.on_token;
  }
  return false;
}

TokenChoice Generator::token_choice() {
  const SamplingOptions& sampling = options_.sampling;
  TokenChoice choice;
  choice.greedy = sampling.greedy();
  choice.sampling = TopKTopP{sampling.temperature, sampling.top_k, sampling.top_p};
  choice.uniform = choice.greedy ? 0.f : sampler_.next_uniform();
  // Padded embedding rows are not tokens (see next_token).
  choice.candidates = std::min(lm_.vocab_size(), static_cast<int64_t>(tokenizer_.vocab_size()));
  return choice;
}

GenerationResult Generator::generate(std::span<const int32_t> prompt, const TextCallback& on_text) {
  const auto start = Clock::now();
  NVFP4LM_CHECK(!prompt.empty(), "the prompt is empty: there is nothing to continue from");
  NVFP4LM_CHECK(options_.max_new_tokens > 0, "--max-tokens must be positive, got {}", options_.max_new_tokens);
  GenerationResult result;
  GenerationStats& stats = result.stats;
  stats.cached_tokens = lm_.length();
  stats.prompt_tokens = static_cast<int64_t>(prompt.size());
  const int64_t needed = stats.cached_tokens + stats.prompt_tokens;
  NVFP4LM_CHECK(needed <= lm_.capacity(), "the prompt has {} tokens{} but {} holds at most {}; shorten the prompt{}",
                stats.prompt_tokens,
                stats.cached_tokens > 0 ? fmt::format(" after {} earlier tokens", stats.cached_tokens) : "",
                lm_.capacity_note(), lm_.capacity(),
                stats.cached_tokens > 0 ? " or start over (/reset)" : " or raise the context size");
  int64_t max_new = options_.max_new_tokens;
  const int64_t room = lm_.capacity() - needed + 1;  // the last generated token is never fed back
  const bool context_bound = max_new > room;
  if (context_bound) {
    log::warn("max new tokens capped from {} to {}: the prompt takes {} of {} tokens ({})", max_new, room, needed,
              lm_.capacity(), lm_.capacity_note());
    max_new = room;
  }

  // Runs ids through the model; the next token then comes from `logits` (host) or is `chosen` already (model).
  const bool in_model = choose_in_model();
  result.chosen_by_model = in_model;
  std::span<const float> logits;
  int32_t chosen = 0;
  auto feed = [&](std::span<const int32_t> ids, FedTokens fed) {
    if (in_model) {
      chosen = lm_.append_choose(ids, token_choice(), fed);
    } else {
      logits = lm_.append(ids, fed);
    }
  };
  {
    MemoryPhase phase("prefill");
    feed(prompt, FedTokens::Prompt);
  }
  stats.prefill_seconds = seconds_since(start);

  AnswerStream answer(tokenizer_, options_, max_new, context_bound);
  auto emit = [&](const std::string& piece) {
    if (piece.empty()) return;
    result.text += piece;
    if (on_text) on_text(piece);
  };

  MemoryPhase phase("decode");
  auto step_start = Clock::now();
  for (;;) {
    const int32_t token = in_model ? chosen : next_token(logits, result.tokens);
    result.tokens.push_back(token);
    if (result.tokens.size() == 1) {
      stats.time_to_first_token_seconds = seconds_since(start);
    } else {
      stats.decode_seconds += seconds_since(step_start);
    }
    if (options_.on_token) options_.on_token(token, logits);
    emit(answer.push(token));
    if (answer.finished()) break;
    step_start = Clock::now();
    const int32_t fed[1] = {token};
    feed(fed, FedTokens::Generated);
    ++stats.decode_steps;
  }
  result.stop_reason = answer.stop_reason();
  result.stop_detail = answer.stop_detail();
  stats.generated_tokens = static_cast<int64_t>(result.tokens.size());
  stats.peak_device_bytes = MemoryTracker::instance().peak_bytes(lm_.device());
  stats.peak_rss_bytes = peak_rss_bytes();
  return result;
}

}  // namespace nvfp4lm
