// The serve scheduler (serve/scheduler.h) without HTTP, on a tiny model: a long prompt prefilled in chunks while a
// short request runs, and a repeated prompt served from the prefix cache, answer with Generator's greedy tokens;
// the metrics count the prefix-cache hit and the reused tokens, the time between tokens and the KV-cache use.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "infer/batch_engine.h"
#include "infer/generator.h"
#include "infer/qwen3_cached_lm.h"
#include "model/qwen3_model.h"
#include "serve/metrics.h"
#include "serve/scheduler.h"
#include "tokenizer/tokenizer_files.h"

namespace nvfp4lm::test {
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

std::vector<int32_t> alone(const SequenceSpec& spec) {
  Qwen3CachedLm lm(model(), kContext);
  GenerationOptions options = spec.options;
  options.token_choice = TokenChoicePlace::Host;
  Generator generator(lm, tokenizer(), options);
  return generator.generate(spec.prompt).tokens;
}

std::vector<int32_t> tokens_of(serve::RequestChannel& channel) {
  std::vector<SequenceEvent> events;
  while (!channel.take(events)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_FALSE(channel.error().has_value()) << channel.error()->what();
  std::vector<int32_t> tokens;
  for (const SequenceEvent& event : events) tokens.push_back(event.token);
  return tokens;
}

// The value of an unlabelled metric line "nvfp4lm_<name> <value>".
double metric(const std::string& text, const std::string& name) {
  const std::string key = "\nnvfp4lm_" + name + " ";
  const size_t at = text.find(key);
  EXPECT_NE(at, std::string::npos) << name << " not in\n" << text;
  return at == std::string::npos ? -1 : std::stod(text.substr(at + key.size()));
}

TEST(Scheduler, ChunkedPrefillsAndPrefixHitsAnswerLikeGenerate) {
  BatchEngineOptions engine_options;
  engine_options.slots = 2;
  engine_options.context = kContext;
  engine_options.prefix_cache = true;
  BatchEngine engine(model(), tokenizer(), engine_options);
  serve::ServeMetrics metrics;
  serve::SchedulerOptions options;
  options.prefill_chunk = 16;
  serve::Scheduler scheduler(engine, metrics, options);

  std::vector<int32_t> long_prompt;
  for (int32_t i = 0; i < 70; ++i) long_prompt.push_back(1000 + i * 7);
  const SequenceSpec running = greedy(tokenizer().encode("Hello"), 16), joining = greedy(long_prompt, 6);
  const auto first = scheduler.submit(running);
  const auto second = scheduler.submit(joining);
  EXPECT_EQ(tokens_of(*first), alone(running));
  const std::vector<int32_t> answer = tokens_of(*second);
  EXPECT_EQ(answer, alone(joining));

  // The long prompt again: all but its last token come from the cache.
  EXPECT_EQ(tokens_of(*scheduler.submit(joining)), answer);
  scheduler.drain(serve::Scheduler::Clock::now() + std::chrono::seconds(10));
  std::string text = "\n";  // (not "\n" + render(): GCC 12 warns a false -Wrestrict on it)
  text += metrics.render(serve::MetricGauges{});
  EXPECT_EQ(metric(text, "prefix_cache_hits_total"), 1);
  EXPECT_EQ(metric(text, "prefix_cache_reused_tokens_total"), 69);
  EXPECT_EQ(metric(text, "inter_token_latency_seconds_count"), 15 + 5 + 5);
  EXPECT_EQ(metric(text, "kv_cache_tokens"), 0);  // nothing runs any more
  EXPECT_EQ(metric(text, "kv_cache_usage_ratio"), 0);
}

}  // namespace
}  // namespace nvfp4lm::test
