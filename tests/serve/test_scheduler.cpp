// The serve scheduler (serve/scheduler.h) without HTTP, on a tiny model: a long prompt prefilled in chunks while a
// short request runs, and a repeated prompt served from the prefix cache, answer with Generator's greedy tokens and
// logprobs, bit for bit, with prefill chunks of 16, 7 and 1 tokens;
// the metrics count the prefix-cache hit and the reused tokens, the time between tokens and the KV-cache use.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "infer/batch_engine.h"
#include "infer/constrain/json_schema.h"
#include "infer/generator.h"
#include "infer/logprobs.h"
#include "infer/qwen3_cached_lm.h"
#include "model/qwen3_model.h"
#include "serve/api_error.h"
#include "serve/metrics.h"
#include "serve/scheduler.h"
#include "tokenizer/tokenizer_files.h"

namespace nvfp4lm::test::test_scheduler {
namespace {

constexpr int64_t kContext = 96;

const Tokenizer& tokenizer() {
  static const Tokenizer loaded = Tokenizer::load(bundled_qwen3_tokenizer_dir());
  return loaded;
}

const Qwen3Model& model() {
  static const Qwen3Model loaded = Qwen3Model::load(synth_tiny_model(7));
  return loaded;
}

SequenceSpec greedy(std::vector<int32_t> prompt, int64_t max_tokens) {
  SequenceSpec spec;
  spec.prompt = std::move(prompt);
  spec.options.max_new_tokens = max_tokens;
  spec.options.sampling.temperature = 0;
  return spec;
}

// Tokens, then the chosen and top log-probabilities of each (equal bits mean equal logits rows).
using Answer = std::vector<double>;
constexpr int kTop = 3;

void add(Answer& answer, int32_t token, const NextTokenLogprobs& logprobs) {
  answer.push_back(token);
  answer.push_back(logprobs.chosen.logprob);
  for (const TokenLogprob& top : logprobs.top) answer.push_back(top.logprob);
}

// What Generator gives the spec alone.
Answer alone(const SequenceSpec& spec) {
  Qwen3CachedLm lm(model(), kContext);
  GenerationOptions options = spec.options;
  options.token_choice = TokenChoicePlace::Host;
  Answer answer;
  options.on_token = [&](int32_t token, std::span<const float> logits) {
    const auto decodable =
        std::min<int64_t>(static_cast<int64_t>(tokenizer().vocab_size()), static_cast<int64_t>(logits.size()));
    add(answer, token, next_token_logprobs(logits, decodable, token, kTop));
  };
  Generator generator(lm, tokenizer(), options);
  generator.generate(spec.prompt);
  return answer;
}

// Waits for the channel's end; its events.
std::vector<SequenceEvent> tokens_of_channel(serve::RequestChannel& channel) {
  std::vector<SequenceEvent> events;
  while (!channel.take(events)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_FALSE(channel.error().has_value()) << channel.error()->what();
  return events;
}

Answer answer_of(serve::RequestChannel& channel) {
  std::vector<SequenceEvent> events;
  while (!channel.take(events)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_FALSE(channel.error().has_value()) << channel.error()->what();
  Answer answer;
  for (const SequenceEvent& event : events) {
    EXPECT_TRUE(event.logprobs.has_value());
    if (event.logprobs) add(answer, event.token, *event.logprobs);
  }
  return answer;
}

// The value of an unlabelled metric line "nvfp4lm_<name> <value>".
double metric(const std::string& text, const std::string& name) {
  const std::string key = "\nnvfp4lm_" + name + " ";
  const size_t at = text.find(key);
  EXPECT_NE(at, std::string::npos) << name << " not in\n" << text;
  return at == std::string::npos ? -1 : std::stod(text.substr(at + key.size()));
}

// Bit for bit (issue 52): whatever the chunk size, the prefix hit and the request beside it.
TEST(Scheduler, ChunkedPrefillsAndPrefixHitsAnswerLikeGenerate) {
  std::vector<int32_t> long_prompt;
  for (int32_t i = 0; i < 70; ++i) long_prompt.push_back(1000 + i * 7);
  SequenceSpec running = greedy(tokenizer().encode("Hello"), 16), joining = greedy(long_prompt, 6);
  running.top_logprobs = joining.top_logprobs = kTop;
  const Answer running_alone = alone(running), joining_alone = alone(joining);
  for (int64_t chunk : {16, 7, 1}) {
    BatchEngineOptions engine_options;
    engine_options.slots = 2;
    engine_options.context = kContext;
    engine_options.prefix_cache = true;
    BatchEngine engine(model(), tokenizer(), engine_options);
    serve::ServeMetrics metrics;
    serve::SchedulerOptions options;
    options.prefill_chunk = chunk;
    serve::Scheduler scheduler(engine, metrics, options);

    const auto first = scheduler.submit(running);
    const auto second = scheduler.submit(joining);
    EXPECT_EQ(answer_of(*first), running_alone) << "chunk " << chunk;
    EXPECT_EQ(answer_of(*second), joining_alone) << "chunk " << chunk;

    // The long prompt again: all but its last token come from the cache.
    EXPECT_EQ(answer_of(*scheduler.submit(joining)), joining_alone) << "chunk " << chunk;
    scheduler.drain(serve::Scheduler::Clock::now() + std::chrono::seconds(10));
    std::string text = "\n";  // (not "\n" + render(): GCC 12 warns a false -Wrestrict on it)
    text += metrics.render(serve::MetricGauges{});
    EXPECT_EQ(metric(text, "prefix_cache_hits_total"), 1);
    EXPECT_EQ(metric(text, "prefix_cache_reused_tokens_total"), 69);
    EXPECT_EQ(metric(text, "inter_token_latency_seconds_count"), 15 + 5 + 5);
    EXPECT_EQ(metric(text, "kv_cache_tokens"), 0);  // nothing runs any more
    EXPECT_EQ(metric(text, "kv_cache_usage_ratio"), 0);
  }
}

// Issue 52: waiting requests' grammars are counted against SchedulerOptions::max_waiting_grammar_bytes; one that would
// pass it is a 429 before it queues, a request without a grammar is not affected.
TEST(Scheduler, WaitingGrammarsHaveAMemoryBudget) {
  const auto grammar = constrain::json_object_grammar();
  BatchEngineOptions engine_options;
  engine_options.slots = 1;
  engine_options.context = kContext;
  BatchEngine engine(model(), tokenizer(), engine_options);
  serve::ServeMetrics metrics;
  serve::SchedulerOptions options;
  options.max_waiting_grammar_bytes = grammar->memory_bytes() - 1;
  serve::Scheduler scheduler(engine, metrics, options);
  SequenceSpec shaped = greedy(tokenizer().encode("Hello"), 4);
  shaped.grammar = grammar;
  try {
    scheduler.submit(shaped);
    ADD_FAILURE() << "a grammar past the budget was queued";
  } catch (const serve::ApiError& error) {
    EXPECT_EQ(error.status(), 429);
    EXPECT_NE(std::string(error.what()).find("grammars"), std::string::npos) << error.what();
  }
  EXPECT_EQ(tokens_of_channel(*scheduler.submit(greedy(tokenizer().encode("Hello"), 2))).size(), 2u);

  serve::SchedulerOptions roomy;
  roomy.max_waiting_grammar_bytes = grammar->memory_bytes();
  BatchEngine other(model(), tokenizer(), engine_options);
  serve::Scheduler fits(other, metrics, roomy);
  EXPECT_NO_THROW(tokens_of_channel(*fits.submit(shaped)));
  scheduler.drain(serve::Scheduler::Clock::now() + std::chrono::seconds(10));
  fits.drain(serve::Scheduler::Clock::now() + std::chrono::seconds(10));
}

}  // namespace
}  // namespace nvfp4lm::test::test_scheduler
