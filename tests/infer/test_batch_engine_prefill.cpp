// BatchEngine's prefix cache and chunked prefill (infer/batch_engine.h) on the CPU with real tiny models (dense, and
// NVFP4 under each CpuMatmul: the fp32 reference, BF16 and int8 activations, which serve runs): a prompt that begins
// with what a free slot holds reuses it (how many tokens, which slot: longest match, then least recently used; never
// a running one); a prompt prefilled in chunks gets the same tokens as one prefilled at once, while a running
// sequence gets a step between two chunks; cancelling a prefilling sequence frees its slot; prompts as long as the
// context work chunked and from the cache. Above all, an answer's tokens and log-probabilities are bit for bit those
// Generator gives the request alone, whatever the cache held, the chunk size and the sequences beside it (issue 52:
// a prefix hit's tail used to run through the decode kernels, 1.3e-2 off in the logprobs).
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "infer/batch_engine.h"
#include "infer/generator.h"
#include "infer/logprobs.h"
#include "infer/qwen3_cached_lm.h"
#include "infer_test_util.h"
#include "io/model_files.h"
#include "io/quantize_model.h"
#include "model/qwen3_model.h"

namespace nvfp4lm::test::test_batch_engine_prefill {
namespace {

constexpr int64_t kContext = 96;
constexpr int kTopLogprobs = 5;

const fs::path& nvfp4_dir() {
  static TempDir dir;
  static const fs::path path = [] {
    QuantizeOptions options;
    options.format = ModelFormat::ModeloptNvfp4;
    quantize_model(*open_model(synth_tiny_model(7)), dir / "nvfp4", options);
    return dir / "nvfp4";
  }();
  return path;
}

// The models every test runs on: the kernels that compute a prompt position differ between them
// (ops/linear_rows.h Prefill).
const Qwen3Model& model_named(const std::string& name) {
  // Made before the memory tracker's first use, so destroyed after it at exit (core/memory.cpp keeps the tracker).
  static std::map<std::string, Qwen3Model> loaded;
  if (auto found = loaded.find(name); found != loaded.end()) return found->second;
  ModelOptions options;
  if (name == "dense") return loaded.emplace(name, Qwen3Model::load(synth_tiny_model(7))).first->second;
  options.cpu_matmul = name == "nvfp4_int8"   ? CpuMatmul::Int8Activations
                       : name == "nvfp4_bf16" ? CpuMatmul::Bf16Activations
                                              : CpuMatmul::Fp32;
  return loaded.emplace(name, Qwen3Model::load(nvfp4_dir(), options)).first->second;
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

std::vector<int32_t> joined(std::vector<int32_t> head, const std::vector<int32_t>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

// An answer as the tests compare it: the tokens and, per token, the chosen and top log-probabilities (equal bits
// mean equal logits rows).
struct Answer {
  std::vector<int32_t> tokens;
  std::vector<double> logprobs;
  std::vector<double> entropies;  // SequenceSpec::entropy

  void add(int32_t token, const NextTokenLogprobs& logprobs) {
    tokens.push_back(token);
    this->logprobs.push_back(logprobs.chosen.logprob);
    for (const TokenLogprob& top : logprobs.top) {
      this->logprobs.push_back(static_cast<double>(top.id));
      this->logprobs.push_back(top.logprob);
    }
  }
  void add(const SequenceEvent& event) {
    ASSERT_TRUE(event.logprobs.has_value()) << "the spec asks for logprobs";
    add(event.token, *event.logprobs);
    if (event.entropy) entropies.push_back(*event.entropy);
  }
};

// Logprobs from K/V that other kernels wrote (reuse_answers: the answer's tokens as the decode steps computed them,
// int8 products under nvfp4_int8, against a prefill's BF16) are close, not equal: two top candidates within the
// tolerance of each other may trade places, so the top lists are matched by token id.
void expect_close_logprobs(const Answer& got, const Answer& want, double tolerance) {
  ASSERT_EQ(got.tokens, want.tokens);
  ASSERT_EQ(got.logprobs.size(), want.logprobs.size());
  constexpr size_t kPerToken = 1 + 2 * kTopLogprobs;  // the chosen token's logprob, then (id, logprob) pairs
  for (size_t t = 0; t * kPerToken < want.logprobs.size(); ++t) {
    const double* g = got.logprobs.data() + t * kPerToken;
    const double* w = want.logprobs.data() + t * kPerToken;
    EXPECT_NEAR(g[0], w[0], tolerance) << "token " << t;
    std::map<int64_t, double> wanted;
    double lowest_wanted = 0;
    for (int k = 0; k < kTopLogprobs; ++k) {
      wanted[static_cast<int64_t>(w[1 + 2 * k])] = w[2 + 2 * k];
      lowest_wanted = std::min(lowest_wanted, w[2 + 2 * k]);
    }
    for (int k = 0; k < kTopLogprobs; ++k) {
      const auto id = static_cast<int64_t>(g[1 + 2 * k]);
      const double logprob = g[2 + 2 * k];
      if (const auto it = wanted.find(id); it != wanted.end())
        EXPECT_NEAR(logprob, it->second, tolerance) << "token " << t << ", candidate " << id;
      else  // entered the list at its edge
        EXPECT_LE(logprob, lowest_wanted + tolerance) << "token " << t << ", candidate " << id;
    }
  }
}

class BatchEnginePrefill : public ::testing::TestWithParam<std::string> {
 protected:
  const Qwen3Model& model() const { return model_named(GetParam()); }

  BatchEngine make_engine(int64_t slots, bool prefix_cache, int64_t context = kContext,
                          bool reuse_answers = false) const {
    BatchEngineOptions options;
    options.slots = slots;
    options.context = context;
    options.prefix_cache = prefix_cache;
    options.reuse_answers = reuse_answers;
    return BatchEngine(model(), qwen3_tokenizer(), options);
  }

  // What Generator gives the spec alone (host sampling, a fresh cache), with the logprobs of its logits rows.
  Answer alone(const SequenceSpec& spec, int64_t context = kContext) const {
    Qwen3CachedLm lm(model(), context);
    GenerationOptions options = spec.options;
    options.token_choice = TokenChoicePlace::Host;
    Answer answer;
    const auto decodable = static_cast<int64_t>(qwen3_tokenizer().vocab_size());
    options.on_token = [&](int32_t token, std::span<const float> logits) {
      const int64_t candidates = std::min<int64_t>(decodable, static_cast<int64_t>(logits.size()));
      answer.add(token, next_token_logprobs(logits, candidates, token, kTopLogprobs));
      if (spec.entropy)
        answer.entropies.push_back(next_token_entropy(logits, candidates, options.sampling.temperature));
    };
    Generator generator(lm, qwen3_tokenizer(), options);
    EXPECT_EQ(generator.generate(spec.prompt).tokens, answer.tokens);
    return answer;
  }
};

// Starts `spec` (prefilled at once) and steps until it finished.
Answer run_to_end(BatchEngine& engine, SequenceSpec spec) {
  spec.top_logprobs = kTopLogprobs;
  Answer answer;
  const int64_t id = engine.start(spec, [&](const SequenceEvent& event) { answer.add(event); });
  while (engine.running() > 0)
    engine.step([&](const SequenceEvent& event) {
      if (event.sequence == id) answer.add(event);
    });
  return answer;
}

std::vector<float> floats(const Tensor& logits) {
  const Tensor row = logits.to(Device::cpu()).contiguous();
  return {row.data<float>(), row.data<float>() + row.numel()};
}

// The model itself: the last token's logits of a prompt prefilled in chunks of any size (1, the decode steps'
// 8 rows and one more, a tail of 1) are those of the whole prompt at once, bit for bit, and so are the keys.
TEST_P(BatchEnginePrefill, ChunkedLogitsEqualTheWholePrompt) {
  const int64_t length = 70;
  const Tensor ids = Tensor::from_ints(ids_from(1000, length), Shape{1, length});
  KVCache whole_cache = model().make_cache(1, kContext);
  const std::vector<float> whole = floats(model().forward_cached(ids, whole_cache));
  for (int64_t chunk : {1, 5, 8, 9, 16, 69}) {
    KVCache chunked_cache = model().make_cache(1, kContext);
    Tensor logits;
    for (int64_t start = 0; start < length; start += chunk)
      logits =
          model().forward_cached(ids.narrow(1, start, std::min(chunk, length - start)).contiguous(), chunked_cache);
    EXPECT_EQ(floats(logits), whole) << "chunks of " << chunk;
    EXPECT_EQ(floats(chunked_cache.keys(1).narrow(1, 0, length)), floats(whole_cache.keys(1).narrow(1, 0, length)))
        << "keys, chunks of " << chunk;
  }
}

TEST_P(BatchEnginePrefill, APrefixHitReusesThePromptAndAnswersAsAlone) {
  BatchEngine engine = make_engine(2, /*prefix_cache=*/true);
  const SequenceSpec first = greedy(encode("Once upon a time, in a land far away, there lived"), 6);
  const Answer answer = run_to_end(engine, first);
  ASSERT_EQ(answer.tokens.size(), 6u);
  EXPECT_EQ(engine.last_reused_tokens(), 0);
  EXPECT_EQ(answer.tokens, alone(first).tokens);
  EXPECT_EQ(answer.logprobs, alone(first).logprobs);

  // The same prompt again: all but its last token come from the cache; the answer and its logprobs are the same.
  EXPECT_EQ(run_to_end(engine, first).logprobs, answer.logprobs);
  EXPECT_EQ(engine.last_reused_tokens(), static_cast<int64_t>(first.prompt.size()) - 1);

  // A follow-up: the prompt, three answer tokens and new text. The slot holds the prompt only (the answer's K/V
  // came from the decode kernels, which a fresh prefill of the follow-up does not use).
  const std::vector<int32_t> three(answer.tokens.begin(), answer.tokens.begin() + 3);
  const SequenceSpec next = greedy(joined(joined(first.prompt, three), encode(" and then the story went on")), 8);
  const Answer followed = run_to_end(engine, next);
  EXPECT_EQ(engine.last_reused_tokens(), static_cast<int64_t>(first.prompt.size()));
  const Answer expected = alone(next);
  EXPECT_EQ(followed.tokens, expected.tokens);
  EXPECT_EQ(followed.logprobs, expected.logprobs);

  // Caching off: nothing is reused, the same answer.
  BatchEngine plain = make_engine(2, /*prefix_cache=*/false);
  run_to_end(plain, first);
  EXPECT_EQ(run_to_end(plain, next).logprobs, expected.logprobs);
  EXPECT_EQ(plain.last_reused_tokens(), 0);
}

// BatchEngineOptions::reuse_answers: the slot also keeps the answer's tokens that were fed back (5 of 6), so the
// follow-up reuses the prompt and the three answer tokens it repeats; its answer is then close to the one alone.
TEST_P(BatchEnginePrefill, ReuseAnswersKeepsTheFedBackAnswerTokens) {
  BatchEngine engine = make_engine(1, /*prefix_cache=*/true, kContext, /*reuse_answers=*/true);
  const SequenceSpec first = greedy(encode("Once upon a time, in a land far away, there lived"), 6);
  const Answer answer = run_to_end(engine, first);
  const std::vector<int32_t> three(answer.tokens.begin(), answer.tokens.begin() + 3);
  const SequenceSpec next = greedy(joined(joined(first.prompt, three), encode(" and then")), 4);
  const Answer followed = run_to_end(engine, next);
  EXPECT_EQ(engine.last_reused_tokens(), static_cast<int64_t>(first.prompt.size()) + 3);
  expect_close_logprobs(followed, alone(next), 0.1);
}

// A running sequence's slot is never taken; its prompt's K/V are copied into the other slot instead.
TEST_P(BatchEnginePrefill, ARunningSlotIsNeverTakenButItsPromptIsCopied) {
  BatchEngine engine = make_engine(2, /*prefix_cache=*/true);
  const SequenceSpec spec = greedy(encode("def fib(n): return n if n < 2 else"), 20);
  const auto shared = static_cast<int64_t>(spec.prompt.size()) - 1;
  const int64_t first = engine.start(spec, {});
  engine.step({});
  std::vector<int32_t> second;
  const int64_t copy = engine.start(spec, [&](const SequenceEvent& event) { second.push_back(event.token); });
  EXPECT_EQ(engine.last_reused_tokens(), shared);  // copied from the running sequence's slot
  EXPECT_EQ(second.front(), alone(spec).tokens.front());
  engine.cancel(first);  // its slot keeps the prompt
  engine.cancel(copy);
  EXPECT_EQ(engine.running(), 0);
  std::vector<int32_t> tokens;
  engine.start(spec, [&](const SequenceEvent& event) { tokens.push_back(event.token); });
  EXPECT_EQ(engine.last_reused_tokens(), shared);
  EXPECT_EQ(tokens.front(), alone(spec).tokens.front());
  // Without prefix caching nothing is shared.
  BatchEngine plain = make_engine(2, /*prefix_cache=*/false);
  plain.start(spec, {});
  plain.start(spec, {});
  EXPECT_EQ(plain.last_reused_tokens(), 0);
}

// GRPO's rollouts (tools/grpo_rollouts.h): the same prompt sampled G times at once. The first prefills it, each other
// copies all but its last token from a running one; every answer has the tokens and logprobs it has alone.
TEST_P(BatchEnginePrefill, OnePromptSampledManyTimesAtOncePrefillsItOnceAndEachAnswersAsAlone) {
  BatchEngine engine = make_engine(5, /*prefix_cache=*/true);  // no slot holds a prompt: every reuse is a copy
  const std::vector<int32_t> prompt = encode("Once upon a time, in a land far away, there lived");
  std::vector<SequenceSpec> specs;
  std::vector<Answer> answers(5);
  std::map<int64_t, size_t> index_of;
  auto sink = [&](const SequenceEvent& event) { answers[index_of.at(event.sequence)].add(event); };
  std::vector<int64_t> reused;
  for (uint64_t seed = 0; seed < 5; ++seed) {
    SequenceSpec spec = greedy(prompt, 6);
    spec.options.sampling.temperature = 1;
    spec.options.sampling.seed = 70 + seed;
    spec.top_logprobs = kTopLogprobs;
    spec.entropy = true;
    specs.push_back(spec);
    if (seed == 4) engine.step(sink);  // the fifth joins sequences that have generated a token
    const int64_t id = engine.begin(spec);
    index_of[id] = specs.size() - 1;
    reused.push_back(engine.last_reused_tokens());
    engine.prefill(0, sink);
  }
  while (engine.running() > 0) engine.step(sink);
  const auto shared = static_cast<int64_t>(prompt.size()) - 1;
  EXPECT_EQ(reused, (std::vector<int64_t>{0, shared, shared, shared, shared}));
  for (size_t i = 0; i < specs.size(); ++i) {
    const Answer expected = alone(specs[i]);
    EXPECT_EQ(answers[i].tokens, expected.tokens) << "answer " << i;
    EXPECT_EQ(answers[i].logprobs, expected.logprobs) << "answer " << i;
    EXPECT_EQ(answers[i].entropies.size(), answers[i].tokens.size()) << "answer " << i;
    EXPECT_EQ(answers[i].entropies, expected.entropies) << "answer " << i;
  }
}

// Three prompts with no common first token in two slots: the one that has not come back for longest is the one
// evicted (first-free would evict the other).
TEST_P(BatchEnginePrefill, ANewPromptEvictsTheLeastRecentlyUsedSlot) {
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

TEST_P(BatchEnginePrefill, ChunkedPrefillInterleavesWithStepsAndKeepsTheAnswers) {
  BatchEngine engine = make_engine(2, /*prefix_cache=*/false);
  SequenceSpec running = greedy(encode("Hello"), 12);
  SequenceSpec joining = greedy(ids_from(1000, 70), 6);
  running.top_logprobs = joining.top_logprobs = kTopLogprobs;
  Answer running_answer, joining_answer;
  std::vector<std::string> order;  // "p" a prefill chunk, "r" a token of the running sequence, "j" of the joining
  const int64_t running_id = engine.start(running, [&](const SequenceEvent& event) { running_answer.add(event); });
  const int64_t joining_id = engine.begin(joining);
  EXPECT_EQ(engine.next_prefill(), joining_id);
  EXPECT_EQ(engine.prefilling(), 1);
  EXPECT_EQ(engine.decoding(), 1);
  auto sink = [&](const SequenceEvent& event) {
    (event.sequence == running_id ? running_answer : joining_answer).add(event);
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
  EXPECT_EQ(running_answer.logprobs, alone(running).logprobs);
  EXPECT_EQ(joining_answer.logprobs, alone(joining).logprobs);
}

TEST_P(BatchEnginePrefill, CancellingAPrefillingSequenceFreesItsSlot) {
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
  EXPECT_EQ(run_to_end(engine, spec).logprobs, alone(spec).logprobs);
  EXPECT_EQ(engine.last_reused_tokens(), 16);
}

// A prompt that fills the context gets one token (ContextFull), chunked or from the cache.
TEST_P(BatchEnginePrefill, APromptAsLongAsTheContext) {
  constexpr int64_t context = 32;
  BatchEngine engine = make_engine(1, /*prefix_cache=*/true, context);
  SequenceSpec spec = greedy(ids_from(1000, context), 4);
  spec.top_logprobs = kTopLogprobs;
  const Answer expected = alone(spec, context);
  for (int round = 0; round < 2; ++round) {
    std::vector<SequenceEvent> events;
    Answer answer;
    engine.begin(spec);
    int64_t chunks = 0;
    while (engine.prefill(10, [&](const SequenceEvent& event) {
      events.push_back(event);
      answer.add(event);
    }) > 0)
      ++chunks;
    EXPECT_EQ(chunks, round == 0 ? 4 : 1) << "round " << round;
    EXPECT_EQ(engine.last_reused_tokens(), round == 0 ? 0 : context - 1);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_TRUE(events[0].finished);
    EXPECT_EQ(events[0].stop_reason, StopReason::ContextFull);
    EXPECT_EQ(answer.logprobs, expected.logprobs) << "round " << round;
    EXPECT_TRUE(engine.has_free_slot());
  }
}

// Issue 52's acceptance on the CPU: requests that share prefixes (and the same request several times) go through an
// engine of 1-3 slots with prefix caching, prefilled whole or in chunks of 1, 3, 8 and 13 tokens between decode steps;
// every answer, greedy or sampled, has the tokens and logprobs of the request alone, bit for bit.
TEST_P(BatchEnginePrefill, AnswersEqualGenerateWhateverTheCacheChunksAndBatch) {
  const std::vector<int32_t> shared = ids_from(1000, 30);
  std::vector<SequenceSpec> specs;
  for (const std::vector<int32_t>& prompt :
       {shared, joined(shared, ids_from(3000, 1)), joined(shared, ids_from(3100, 4)), shared,
        joined(shared, ids_from(3200, 12)), std::vector<int32_t>(shared.begin(), shared.begin() + 9),
        ids_from(5000, 17), joined(shared, ids_from(3100, 4))}) {
    SequenceSpec spec = greedy(prompt, 5);
    spec.top_logprobs = kTopLogprobs;
    if (specs.size() % 3 == 1) {
      spec.options.sampling.temperature = 1;
      spec.options.sampling.seed = 40 + specs.size();
    }
    specs.push_back(spec);
  }
  std::vector<Answer> expected;
  for (const SequenceSpec& spec : specs) expected.push_back(alone(spec));

  for (int64_t slots : {1, 2, 3}) {
    for (int64_t chunk : {0, 1, 3, 8, 13}) {
      BatchEngine engine = make_engine(slots, /*prefix_cache=*/true);
      std::vector<Answer> answers(specs.size());
      std::map<int64_t, size_t> index_of;
      std::deque<size_t> waiting;
      for (size_t i = 0; i < specs.size(); ++i) waiting.push_back(i);
      int64_t reused = 0;
      auto sink = [&](const SequenceEvent& event) { answers[index_of.at(event.sequence)].add(event); };
      while (!waiting.empty() || engine.running() > 0) {
        if (!waiting.empty() && engine.has_free_slot()) {
          index_of[engine.begin(specs[waiting.front()])] = waiting.front();
          reused += engine.last_reused_tokens();
          waiting.pop_front();
        }
        engine.prefill(chunk, sink);
        engine.step(sink);
      }
      EXPECT_GT(reused, 0) << slots << " slots, chunk " << chunk << ": no prefix hit to test";
      for (size_t i = 0; i < specs.size(); ++i) {
        EXPECT_EQ(answers[i].tokens, expected[i].tokens) << slots << " slots, chunk " << chunk << ", request " << i;
        EXPECT_EQ(answers[i].logprobs, expected[i].logprobs) << slots << " slots, chunk " << chunk << ", request " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, BatchEnginePrefill,
                         ::testing::Values("dense", "nvfp4_fp32", "nvfp4_bf16", "nvfp4_int8"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace nvfp4lm::test::test_batch_engine_prefill
