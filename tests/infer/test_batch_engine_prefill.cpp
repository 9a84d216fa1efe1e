// BatchEngine's prefix cache and chunked prefill (infer/batch_engine.h) on the CPU with a real tiny model: a prompt
// that begins with what a free slot holds reuses it (how many tokens, which slot: longest match, then least recently
// used; never a running one) and gets the greedy tokens Generator gives it alone; a prompt prefilled in chunks gets
// the same tokens as one prefilled at once, while a running sequence gets a step between two chunks; the logits of a
// chunked or reused prefill are those of a whole one up to fp32 rounding; cancelling a prefilling sequence frees its
// slot; prompts as long as the context work chunked and from the cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "infer/batch_engine.h"
#include "infer/generator.h"
#include "infer/qwen3_cached_lm.h"
#include "infer_test_util.h"
#include "model/qwen3_model.h"

namespace nvfp4lm::test {
namespace {

constexpr int64_t kContext = 96;

const Qwen3Model& model() {
  static const Qwen3Model loaded = Qwen3Model::load(synth_tiny_model(7));
  return loaded;
}

BatchEngine make_engine(int64_t slots, bool prefix_cache, int64_t context = kContext) {
  BatchEngineOptions options;
  options.slots = slots;
  options.context = context;
  options.prefix_cache = prefix_cache;
  return BatchEngine(model(), qwen3_tokenizer(), options);
}

SequenceSpec greedy(std::vector<int32_t> prompt, int64_t max_tokens) {
  SequenceSpec spec;
  spec.prompt = std::move(prompt);
  spec.options.max_new_tokens = max_tokens;
  spec.options.sampling.temperature = 0;
  return spec;
}

std::vector<int32_t> encode(const std::string& text) { return qwen3_tokenizer().encode(text); }

// `count` token ids from `first` on (plain ids the tokenizer decodes).
std::vector<int32_t> ids_from(int32_t first, int64_t count) {
  std::vector<int32_t> ids(static_cast<size_t>(count));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = first + static_cast<int32_t>(i * 7 % 500);
  return ids;
}

std::vector<int32_t> alone(const SequenceSpec& spec, int64_t context = kContext) {
  Qwen3CachedLm lm(model(), context);
  GenerationOptions options = spec.options;
  options.token_choice = TokenChoicePlace::Host;
  Generator generator(lm, qwen3_tokenizer(), options);
  return generator.generate(spec.prompt).tokens;
}

// Starts `spec` (prefilled at once) and steps until it finished; its tokens.
std::vector<int32_t> run_to_end(BatchEngine& engine, const SequenceSpec& spec) {
  std::vector<int32_t> tokens;
  const int64_t id = engine.start(spec, [&](const SequenceEvent& event) { tokens.push_back(event.token); });
  while (engine.running() > 0)
    engine.step([&](const SequenceEvent& event) {
      if (event.sequence == id) tokens.push_back(event.token);
    });
  return tokens;
}

std::vector<float> last_logits(const Tensor& logits) {
  const Tensor row = logits.to(Device::cpu()).contiguous();
  return {row.data<float>(), row.data<float>() + row.numel()};
}

std::string scientific(double value) {
  std::ostringstream out;
  out << std::scientific << std::setprecision(2) << value;
  return out.str();
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

// The model itself: the last token's logits of a prompt prefilled in chunks of 16 (and of one that continues a
// cache holding its first tokens) are those of the whole prompt at once, up to fp32 rounding.
TEST(BatchEnginePrefill, ChunkedLogitsMatchTheWholePrompt) {
  const std::vector<int32_t> prompt = ids_from(1000, 70);
  const Tensor ids = Tensor::from_ints(prompt, Shape{1, 70});
  KVCache whole_cache = model().make_cache(1, kContext);
  const std::vector<float> whole = last_logits(model().forward_cached(ids, whole_cache));
  KVCache chunked_cache = model().make_cache(1, kContext);
  Tensor logits;
  for (int64_t start = 0; start < 70; start += 16) {
    const int64_t tokens = std::min<int64_t>(16, 70 - start);
    logits = model().forward_cached(ids.narrow(1, start, tokens).contiguous(), chunked_cache);
  }
  const float diff = max_abs_diff(last_logits(logits), whole);
  RecordProperty("max_abs_logit_diff", scientific(diff));
  EXPECT_LE(diff, 1e-4f) << "chunked vs whole prefill";
}

TEST(BatchEnginePrefill, APrefixHitReusesTheSlotAndKeepsTheTokens) {
  BatchEngine engine = make_engine(2, /*prefix_cache=*/true);
  const SequenceSpec first = greedy(encode("Once upon a time, in a land far away, there lived"), 6);
  const std::vector<int32_t> answer = run_to_end(engine, first);
  ASSERT_EQ(answer.size(), 6u);
  EXPECT_EQ(engine.last_reused_tokens(), 0);

  // The same prompt again: all but its last token come from the cache; its first token is the same.
  SequenceSpec again = first;
  again.top_logprobs = 0;
  EXPECT_EQ(run_to_end(engine, again), answer);
  EXPECT_EQ(engine.last_reused_tokens(), static_cast<int64_t>(first.prompt.size()) - 1);

  // A follow-up: the prompt, three answer tokens (their K/V written by decode steps) and new text. The slot
  // holds the prompt and the five answer tokens that were fed back.
  std::vector<int32_t> follow = first.prompt;
  follow.insert(follow.end(), answer.begin(), answer.begin() + 3);
  const std::vector<int32_t> more = encode(" and then the story went on");
  follow.insert(follow.end(), more.begin(), more.end());
  const SequenceSpec next = greedy(follow, 8);
  const std::vector<int32_t> tokens = run_to_end(engine, next);
  EXPECT_EQ(engine.last_reused_tokens(), static_cast<int64_t>(first.prompt.size()) + 3);
  EXPECT_EQ(tokens, alone(next));

  // Caching off: nothing is reused.
  BatchEngine plain = make_engine(2, /*prefix_cache=*/false);
  run_to_end(plain, first);
  EXPECT_EQ(run_to_end(plain, next), tokens);
  EXPECT_EQ(plain.last_reused_tokens(), 0);
}

TEST(BatchEnginePrefill, ReusedLogprobsAreCloseToAFreshPrefill) {
  SequenceSpec spec = greedy(encode("The capital of France is Paris, and the capital of Spain is"), 1);
  spec.top_logprobs = 20;
  auto first_logprobs = [&](BatchEngine& engine) {
    std::vector<double> values;
    engine.start(spec, [&](const SequenceEvent& event) {
      for (const auto& top : event.logprobs->top) values.push_back(top.logprob);
    });
    return values;
  };
  BatchEngine engine = make_engine(1, /*prefix_cache=*/true);
  const std::vector<double> fresh = first_logprobs(engine);
  const std::vector<double> reused = first_logprobs(engine);
  EXPECT_GT(engine.last_reused_tokens(), 0);
  ASSERT_EQ(fresh.size(), reused.size());
  double diff = 0;
  for (size_t i = 0; i < fresh.size(); ++i) diff = std::max(diff, std::abs(fresh[i] - reused[i]));
  RecordProperty("max_abs_logprob_diff", scientific(diff));
  EXPECT_LE(diff, 1e-4);
}

TEST(BatchEnginePrefill, ARunningSlotIsNeverReused) {
  BatchEngine engine = make_engine(2, /*prefix_cache=*/true);
  const SequenceSpec spec = greedy(encode("def fib(n): return n if n < 2 else"), 20);
  const int64_t first = engine.start(spec, {});
  engine.step({});
  engine.start(spec, {});  // the slot with this prompt runs: the other, empty one
  EXPECT_EQ(engine.last_reused_tokens(), 0);
  engine.cancel(first);  // its slot keeps the prompt and the token fed back
  EXPECT_EQ(engine.running(), 1);
  std::vector<int32_t> tokens;
  engine.start(spec, [&](const SequenceEvent& event) { tokens.push_back(event.token); });
  EXPECT_EQ(engine.last_reused_tokens(), static_cast<int64_t>(spec.prompt.size()) - 1);
  EXPECT_EQ(tokens.front(), alone(spec).front());
}

// Three prompts with no common first token in two slots: the one that has not come back for longest is the one
// evicted (first-free would evict the other).
TEST(BatchEnginePrefill, ANewPromptEvictsTheLeastRecentlyUsedSlot) {
  BatchEngine engine = make_engine(2, /*prefix_cache=*/true);
  const SequenceSpec x = greedy(ids_from(1000, 12), 2), y = greedy(ids_from(2000, 12), 2),
                     z = greedy(ids_from(3000, 12), 2);
  run_to_end(engine, x);  // slot 0
  run_to_end(engine, y);  // slot 1 (slot 0 holds x)
  run_to_end(engine, x);  // slot 0 again: a hit; slot 1 is now the least recently used
  EXPECT_EQ(engine.last_reused_tokens(), 11);
  run_to_end(engine, z);  // evicts y
  EXPECT_EQ(engine.last_reused_tokens(), 0);
  run_to_end(engine, x);
  EXPECT_EQ(engine.last_reused_tokens(), 11);
  run_to_end(engine, y);
  EXPECT_EQ(engine.last_reused_tokens(), 0);
}

TEST(BatchEnginePrefill, ChunkedPrefillInterleavesWithStepsAndKeepsTheTokens) {
  BatchEngine engine = make_engine(2, /*prefix_cache=*/false);
  const SequenceSpec running = greedy(encode("Hello"), 12);
  const SequenceSpec joining = greedy(ids_from(1000, 70), 6);
  std::vector<int32_t> running_tokens, joining_tokens;
  std::vector<std::string> order;  // "p" a prefill chunk, "r" a token of the running sequence, "j" of the joining
  const int64_t running_id =
      engine.start(running, [&](const SequenceEvent& event) { running_tokens.push_back(event.token); });
  const int64_t joining_id = engine.begin(joining);
  EXPECT_EQ(engine.next_prefill(), joining_id);
  EXPECT_EQ(engine.prefilling(), 1);
  EXPECT_EQ(engine.decoding(), 1);
  auto sink = [&](const SequenceEvent& event) {
    (event.sequence == running_id ? running_tokens : joining_tokens).push_back(event.token);
    order.emplace_back(event.sequence == running_id ? "r" : "j");
  };
  std::vector<int64_t> chunks;
  while (engine.running() > 0) {
    if (const int64_t tokens = engine.prefill(16, sink); tokens > 0) {
      chunks.push_back(tokens);
      order.emplace_back("p");
    }
    engine.step(sink);
  }
  EXPECT_EQ(chunks, (std::vector<int64_t>{16, 16, 16, 16, 6}));
  // Each chunk is followed by a step of the running sequence; the joining one's first token comes with its last
  // chunk, and from then on both decode together.
  std::string trace;
  for (const std::string& entry : order) trace += entry;
  EXPECT_EQ(trace.substr(0, 14), "prprprprjprjrj") << trace;
  EXPECT_EQ(running_tokens, alone(running));
  EXPECT_EQ(joining_tokens, alone(joining));
}

TEST(BatchEnginePrefill, CancellingAPrefillingSequenceFreesItsSlot) {
  BatchEngine engine = make_engine(1, /*prefix_cache=*/true);
  const SequenceSpec spec = greedy(ids_from(1000, 40), 4);
  const int64_t id = engine.begin(spec);
  EXPECT_FALSE(engine.has_free_slot());
  EXPECT_EQ(engine.prefill(16, {}), 16);
  EXPECT_EQ(engine.cached_tokens(), 16);
  engine.cancel(id);
  EXPECT_TRUE(engine.has_free_slot());
  EXPECT_EQ(engine.prefilling(), 0);
  EXPECT_EQ(engine.next_prefill(), 0);
  EXPECT_EQ(engine.prefill(16, {}), 0);
  // The 16 tokens it prefilled stay in the slot's cache.
  EXPECT_EQ(run_to_end(engine, spec), alone(spec));
  EXPECT_EQ(engine.last_reused_tokens(), 16);
}

// A prompt that fills the context gets one token (ContextFull), chunked or from the cache.
TEST(BatchEnginePrefill, APromptAsLongAsTheContext) {
  constexpr int64_t context = 32;
  BatchEngine engine = make_engine(1, /*prefix_cache=*/true, context);
  const SequenceSpec spec = greedy(ids_from(1000, context), 4);
  const int32_t expected = alone(spec, context).front();
  for (int round = 0; round < 2; ++round) {
    std::vector<SequenceEvent> events;
    engine.begin(spec);
    int64_t chunks = 0;
    while (engine.prefill(10, [&](const SequenceEvent& event) { events.push_back(event); }) > 0) ++chunks;
    EXPECT_EQ(chunks, round == 0 ? 4 : 1) << "round " << round;
    EXPECT_EQ(engine.last_reused_tokens(), round == 0 ? 0 : context - 1);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_TRUE(events[0].finished);
    EXPECT_EQ(events[0].stop_reason, StopReason::ContextFull);
    EXPECT_EQ(events[0].token, expected) << "round " << round;
    EXPECT_TRUE(engine.has_free_slot());
  }
}

}  // namespace
}  // namespace nvfp4lm::test
