// BatchEngine (infer/batch_engine.h) on the CPU with real tiny models (dense and NVFP4): sequences decoded together
// get exactly the tokens they get alone from Generator — greedy and sampled, 8 requests of different lengths joining
// at different steps, 10 at once (past the 8 rows of one kernel call), stop strings and end-of-sequence ids —
// penalties and logit bias as Generator's (counting the answer's tokens only), cancelling frees a slot without
// disturbing the others, specs that cannot run are one-line Errors, and the log-probabilities are the log-softmax of
// the logits; sequences of different LoRA adapters batched together get what each gets alone.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "common/lora_test_util.h"
#include "core/memory.h"
#include "infer/batch_engine.h"
#include "infer/generator.h"
#include "infer/qwen3_cached_lm.h"
#include "infer_test_util.h"
#include "io/model_files.h"
#include "io/quantize_model.h"
#include "model/qwen3_model.h"

namespace nvfp4lm::test::test_batch_engine {
namespace {

const Qwen3Model& dense_model() {
  static const Qwen3Model model = Qwen3Model::load(synth_tiny_model(7));
  return model;
}

const Qwen3Model& nvfp4_model() {
  static TempDir dir;
  static const Qwen3Model model = [] {
    QuantizeOptions options;
    options.format = ModelFormat::ModeloptNvfp4;
    quantize_model(*open_model(synth_tiny_model(7)), dir / "nvfp4", options);
    return Qwen3Model::load(dir / "nvfp4");
  }();
  return model;
}

SequenceSpec spec_for(const std::string& prompt, int64_t max_tokens, float temperature, uint64_t seed) {
  SequenceSpec spec;
  spec.prompt = qwen3_tokenizer().encode(prompt);
  spec.options.max_new_tokens = max_tokens;
  spec.options.sampling.temperature = temperature;
  spec.options.sampling.seed = seed;
  return spec;
}

// What Generator gives for the spec alone (host sampling, a cache of exactly the engine's context).
GenerationResult alone(const Qwen3Model& model, const SequenceSpec& spec, int64_t context) {
  Qwen3CachedLm lm(model, context, {}, std::nullopt, spec.adapter);
  GenerationOptions options = spec.options;
  options.token_choice = TokenChoicePlace::Host;
  Generator generator(lm, qwen3_tokenizer(), options);
  return generator.generate(spec.prompt);
}

struct Collected {
  std::vector<int32_t> tokens;
  std::vector<double> logprobs;  // of each chosen token: equal bits mean equal logits rows
  std::string text;
  bool finished = false;
  StopReason reason = StopReason::MaxTokens;
};

// Runs `specs` through the engine, starting spec i at step joins[i] (several may join at one step), stepping until
// all finished; returns each one's tokens and text.
BatchEngine make_engine(const Qwen3Model& model, int64_t slots, int64_t context) {
  BatchEngineOptions options;
  options.slots = slots;
  options.context = context;
  return BatchEngine(model, qwen3_tokenizer(), options);
}

std::vector<Collected> run_schedule(BatchEngine& engine, const std::vector<SequenceSpec>& specs,
                                    const std::vector<int>& joins) {
  std::vector<Collected> results(specs.size());
  std::map<int64_t, size_t> index_of;
  auto collect = [&](size_t index, const SequenceEvent& event) {
    Collected& result = results[index];
    EXPECT_FALSE(result.finished) << "an event after the sequence finished";
    result.tokens.push_back(event.token);
    if (event.logprobs) result.logprobs.push_back(event.logprobs->chosen.logprob);
    result.text += event.text;
    result.finished = event.finished;
    result.reason = event.stop_reason;
    EXPECT_EQ(event.generated_tokens, static_cast<int64_t>(result.tokens.size()));
    EXPECT_EQ(event.prompt_tokens, static_cast<int64_t>(specs[index].prompt.size()));
  };
  for (int step = 0;; ++step) {
    for (size_t i = 0; i < specs.size(); ++i) {
      if (joins[i] != step) continue;
      const int64_t id = engine.start(specs[i], [&, i](const SequenceEvent& event) { collect(i, event); });
      index_of[id] = i;
    }
    const bool later = std::any_of(joins.begin(), joins.end(), [&](int join) { return join > step; });
    if (engine.running() == 0 && !later) break;
    engine.step([&](const SequenceEvent& event) { collect(index_of.at(event.sequence), event); });
  }
  return results;
}

// Batched: tokens, text and end equal Generator's alone; the chosen tokens' log-probabilities equal, bit for bit,
// those of the same engine run with one slot (one sequence at a time), so the logits rows are the same too.
void expect_like_alone(const Qwen3Model& model, std::vector<SequenceSpec> specs, const std::vector<int>& joins,
                       int64_t slots, const std::string& what) {
  const int64_t context = 96;
  for (SequenceSpec& spec : specs) spec.top_logprobs = 0;
  BatchEngine engine = make_engine(model, slots, context);
  const std::vector<Collected> batched = run_schedule(engine, specs, joins);
  BatchEngine single = make_engine(model, 1, context);
  for (size_t i = 0; i < specs.size(); ++i) {
    const GenerationResult expected = alone(model, specs[i], context);
    EXPECT_TRUE(batched[i].finished) << what << ": sequence " << i;
    EXPECT_EQ(batched[i].tokens, expected.tokens) << what << ": sequence " << i;
    EXPECT_EQ(batched[i].text, expected.text) << what << ": sequence " << i;
    EXPECT_EQ(batched[i].reason, expected.stop_reason) << what << ": sequence " << i;
    const Collected solo = run_schedule(single, {specs[i]}, {0})[0];
    EXPECT_EQ(batched[i].logprobs, solo.logprobs) << what << ": sequence " << i;
  }
  EXPECT_EQ(engine.running(), 0);
}

std::vector<SequenceSpec> eight_requests(float temperature) {
  const std::vector<std::string> prompts = {"Hello",
                                            "The capital of France is",
                                            "1, 2, 3, 4, 5,",
                                            "Once upon a time, in a land far away, there lived",
                                            "def fib(n):",
                                            "日本語のテキスト",
                                            "a",
                                            "Write a haiku about the sea and the wind and the long grey evening"};
  std::vector<SequenceSpec> specs;
  for (size_t i = 0; i < prompts.size(); ++i)
    specs.push_back(spec_for(prompts[i], 5 + static_cast<int64_t>(3 * i % 11), temperature, 100 + i));
  return specs;
}

// 8 requests of different prompt and answer lengths join at steps 0, 0, 1, 3, 4, 4, 6, 9: the batch grows and
// shrinks while sequences finish and others join.
const std::vector<int> kJoins = {0, 0, 1, 3, 4, 4, 6, 9};

TEST(BatchEngine, GreedyBatchedEqualsOneAtATime) {
  expect_like_alone(dense_model(), eight_requests(0.f), kJoins, 8, "dense greedy");
  expect_like_alone(nvfp4_model(), eight_requests(0.f), kJoins, 8, "NVFP4 greedy");
}

TEST(BatchEngine, SampledBatchedEqualsOneAtATime) {
  expect_like_alone(dense_model(), eight_requests(0.8f), kJoins, 8, "dense sampled");
}

// Sequences of two LoRA adapters and of the base in one batch (model/lora_runtime.h): each gets exactly the tokens
// Generator gives it alone over a model that holds its adapter only (the base's: over the model without adapters),
// and a slot's cached prefix is reused by the same adapter only.
TEST(BatchEngine, SequencesOfDifferentAdaptersBatchedEqualEachAlone) {
  const TempDir dir;
  std::vector<RandomAdapter> adapters(2);
  adapters[1].seed = 2;
  adapters[1].rank = 8;
  adapters[1].alpha = 16;
  adapters[1].targets = {LoraTarget::Q, LoraTarget::V, LoraTarget::Gate};
  std::vector<LoraAdapterSpec> files;
  for (size_t k = 0; k < adapters.size(); ++k) {
    files.push_back({"adapter" + std::to_string(k), dir / ("adapter" + std::to_string(k))});
    write_random_adapter(files.back().dir, dense_model().config(), adapters[k]);
  }
  Qwen3Model served = dense_model();
  served.set_lora_adapters(
      std::make_shared<const LoraAdapterSet>(LoraAdapterSet::load(files, served.config(), DType::F32, Device::cpu())));
  std::vector<Qwen3Model> single;  // the base with adapter k alone
  for (const LoraAdapterSpec& file : files) {
    single.push_back(dense_model());
    single.back().set_lora_adapters(std::make_shared<const LoraAdapterSet>(
        LoraAdapterSet::load(std::span(&file, 1), served.config(), DType::F32, Device::cpu())));
  }

  std::vector<SequenceSpec> specs = eight_requests(0.f);
  for (int i = 0; i < 3; ++i) specs.push_back(spec_for("The capital of France is", 8, 0.f, 7));
  for (size_t i = 0; i < specs.size(); ++i) specs[i].adapter = static_cast<int>(i % 3) - 1;
  std::vector<int> joins = kJoins;
  joins.insert(joins.end(), {2, 2, 5});
  const int64_t context = 96;
  BatchEngine engine = make_engine(served, static_cast<int64_t>(specs.size()), context);
  const std::vector<Collected> batched = run_schedule(engine, specs, joins);
  for (size_t i = 0; i < specs.size(); ++i) {
    SequenceSpec own = specs[i];
    const Qwen3Model& model = own.adapter == kNoLoraAdapter ? dense_model() : single[static_cast<size_t>(own.adapter)];
    if (own.adapter != kNoLoraAdapter) own.adapter = 0;
    const GenerationResult expected = alone(model, own, context);
    EXPECT_EQ(batched[i].tokens, expected.tokens) << "sequence " << i << ", adapter " << specs[i].adapter;
    EXPECT_EQ(batched[i].text, expected.text) << "sequence " << i;
  }
  // One prompt, three adapters: three answers.
  const size_t first = specs.size() - 3;
  EXPECT_NE(batched[first].tokens, batched[first + 1].tokens);
  EXPECT_NE(batched[first + 1].tokens, batched[first + 2].tokens);
  EXPECT_NE(batched[first].tokens, batched[first + 2].tokens);

  BatchEngineOptions options;
  options.slots = 1;
  options.context = context;
  options.prefix_cache = true;
  BatchEngine cached(served, qwen3_tokenizer(), options);
  SequenceSpec spec = spec_for("The capital of France is", 3, 0.f, 7);
  spec.adapter = 0;
  run_schedule(cached, {spec}, {0});
  spec.adapter = 1;
  run_schedule(cached, {spec}, {0});
  EXPECT_EQ(cached.last_reused_tokens(), 0) << "another adapter's K/V reused";
  run_schedule(cached, {spec}, {0});
  EXPECT_GT(cached.last_reused_tokens(), 0) << "the same adapter's prefix not reused";
}

// Presence and frequency penalties count the answer's tokens only, as Generator's do; a bias applies each step.
TEST(BatchEngine, PenaltiesAndBiasBatchedEqualsOneAtATime) {
  std::vector<SequenceSpec> specs = eight_requests(0.8f);
  specs.resize(4);  // four joining at steps 0, 0, 1, 3 keep it fast
  for (size_t i = 0; i < specs.size(); ++i) {
    SamplingOptions& sampling = specs[i].options.sampling;
    sampling.presence_penalty = i % 2 == 0 ? 1.5f : 0.0f;
    sampling.frequency_penalty = i % 3 == 0 ? 0.0f : 2.0f;
    sampling.logit_bias = {{static_cast<int32_t>(100 + i), 5.0f}};
  }
  specs[0].options.sampling.temperature = 0.f;  // greedy too
  expect_like_alone(dense_model(), specs, {0, 0, 1, 3}, 4, "dense, penalties and bias");
}

TEST(BatchEngine, LogitBiasForcesTheGreedyToken) {
  const int32_t forced = qwen3_tokenizer().encode(" sea")[0];
  SequenceSpec spec = spec_for("The capital of France is", 6, 0.f, 0);
  spec.options.sampling.logit_bias = {{forced, 100.0f}};
  BatchEngine engine = make_engine(dense_model(), 2, 32);
  const std::vector<Collected> runs = run_schedule(engine, {spec, spec_for("Hello", 6, 0.f, 0)}, {0, 0});
  EXPECT_EQ(runs[0].tokens, std::vector<int32_t>(6, forced));
  EXPECT_NE(runs[1].tokens, std::vector<int32_t>(6, forced)) << "the bias belongs to one sequence";
}

TEST(BatchEngine, MoreRowsThanOneKernelCallTakes) {
  std::vector<SequenceSpec> specs = eight_requests(0.f);
  specs.push_back(spec_for("Ten rows", 6, 0.f, 0));
  specs.push_back(spec_for("and eleven", 7, 0.f, 0));
  expect_like_alone(nvfp4_model(), specs, std::vector<int>(specs.size(), 0), 12, "NVFP4, 10 rows");
}

TEST(BatchEngine, StopStringsAndEndOfSequenceEndAnswersAsAlone) {
  std::vector<SequenceSpec> specs = eight_requests(0.f);
  const GenerationResult first = alone(dense_model(), specs[1], 96);
  ASSERT_GE(first.tokens.size(), 3u);
  // End one answer at its third token (as an end-of-sequence id) and another at a piece of its text.
  for (SequenceSpec& spec : specs) spec.options.eos_ids = {first.tokens[2]};
  const std::string text = alone(dense_model(), specs[3], 96).text;
  ASSERT_GE(text.size(), 4u);
  specs[3].options.stop_strings = {text.substr(2, 2)};
  expect_like_alone(dense_model(), specs, kJoins, 4, "stops");
}

TEST(BatchEngine, CancelFreesTheSlotAndLeavesTheOthersAlone) {
  const std::vector<SequenceSpec> specs = eight_requests(0.f);
  BatchEngine engine = make_engine(dense_model(), 2, 96);
  std::vector<int32_t> kept;
  const int64_t keep = engine.start(specs[7], [&](const SequenceEvent& event) { kept.push_back(event.token); });
  const int64_t drop = engine.start(specs[3], {});
  EXPECT_FALSE(engine.has_free_slot());
  expect_error([&] { engine.start(specs[0], {}); }, {"all 2 KV-cache slots are busy"});
  engine.step([&](const SequenceEvent& event) {
    if (event.sequence == keep) kept.push_back(event.token);
  });
  engine.cancel(drop);
  EXPECT_TRUE(engine.has_free_slot());
  engine.cancel(drop);  // a second cancel is a no-op
  engine.start(specs[5], {});
  while (engine.running() > 0)
    engine.step([&](const SequenceEvent& event) {
      if (event.sequence == keep) kept.push_back(event.token);
    });
  EXPECT_EQ(kept, alone(dense_model(), specs[7], 96).tokens);
}

TEST(BatchEngine, SpecsThatCannotRunAreErrors) {
  BatchEngine engine = make_engine(dense_model(), 1, 8);
  SequenceSpec spec = spec_for("Hello", 4, 0.f, 0);
  SequenceSpec empty = spec;
  empty.prompt.clear();
  expect_error([&] { engine.check(empty); }, {"prompt is empty"});
  SequenceSpec long_prompt = spec;
  long_prompt.prompt.assign(9, 1);
  expect_error([&] { engine.check(long_prompt); }, {"9 tokens", "8 tokens"});
  SequenceSpec bad_id = spec;
  bad_id.prompt.push_back(200000);
  expect_error([&] { engine.check(bad_id); }, {"token id 200000"});
  SequenceSpec bad_sampling = spec;
  bad_sampling.options.sampling.top_p = 0.f;
  expect_error([&] { engine.check(bad_sampling); }, {"--top-p"});
  SequenceSpec bad_bias = spec;
  bad_bias.options.sampling.logit_bias = {{200000, 1.0f}};
  expect_error([&] { engine.check(bad_bias); }, {"logit_bias", "token id 200000"});
  SequenceSpec bad_top = spec;
  bad_top.top_logprobs = 21;
  expect_error([&] { engine.check(bad_top); }, {"top logprobs"});
  EXPECT_EQ(engine.running(), 0);
  // A prompt that fills the context gets its one token (the last token is never fed back), as Generator caps it.
  SequenceSpec full = spec;
  full.prompt.assign(8, 9);
  std::vector<SequenceEvent> events;
  engine.start(full, [&](const SequenceEvent& event) { events.push_back(event); });
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].finished);
  EXPECT_EQ(events[0].stop_reason, StopReason::ContextFull);
  EXPECT_TRUE(engine.has_free_slot());
}

// --max-memory sizes the pool: what the limit leaves after what is allocated and the work space, in whole slots;
// not one slot is a one-line Error naming the flags.
TEST(BatchEngine, SlotsFitTheMemoryLimit) {
  const Qwen3Model& model = dense_model();
  const Device cpu = Device::cpu();
  MemoryTracker& tracker = MemoryTracker::instance();
  EXPECT_EQ(BatchEngine::slots_within_memory(model, 64, 8), 8);  // no limit
  const uint64_t slot = BatchEngine::slot_bytes(model.config(), 64, model.compute_dtype());
  EXPECT_EQ(slot, 2u * 2 * 64 * 2 * 16 * 4);  // K and V x layers x tokens x kv heads x head_dim x fp32
  uint64_t work_for_two = model.forward_work_bytes(1, 64);
  for (int64_t rows = 1; rows <= 2; ++rows) work_for_two += model.forward_work_bytes(rows, 1);
  tracker.set_limit(cpu, tracker.current_bytes(cpu) + work_for_two + 2 * slot + slot / 2);
  const int64_t fit = BatchEngine::slots_within_memory(model, 64, 8);
  tracker.set_limit(cpu, tracker.current_bytes(cpu) + 100);
  const std::string message = error_message([&] { BatchEngine::slots_within_memory(model, 64, 8); });
  tracker.set_limit(cpu, 0);
  EXPECT_EQ(fit, 2);
  EXPECT_NE(message.find("--max-memory"), std::string::npos) << message;
  EXPECT_NE(message.find("--context"), std::string::npos) << message;
}

TEST(BatchEngine, LogprobsAreTheLogSoftmaxOfTheLogits) {
  BatchEngine engine = make_engine(dense_model(), 2, 32);
  SequenceSpec spec = spec_for("The capital of France is", 1, 0.f, 0);
  spec.top_logprobs = 3;
  SequenceEvent first;
  engine.start(spec, [&](const SequenceEvent& event) { first = event; });
  ASSERT_TRUE(first.logprobs.has_value());
  const auto prompt = static_cast<int64_t>(spec.prompt.size());
  const Tensor logits = dense_model().forward(Tensor::from_ints(spec.prompt, Shape{1, prompt}));
  const int64_t vocab = dense_model().config().vocab_size;
  const float* row = logits.data<float>() + (prompt - 1) * vocab;
  const auto decodable = static_cast<int64_t>(qwen3_tokenizer().vocab_size());
  double best = -1e30, sum = 0;
  for (int64_t i = 0; i < decodable; ++i) best = std::max(best, static_cast<double>(row[i]));
  for (int64_t i = 0; i < decodable; ++i) sum += std::exp(row[i] - best);
  const double expected = row[first.token] - best - std::log(sum);
  EXPECT_NEAR(first.logprobs->chosen.logprob, expected, 1e-4);
  ASSERT_EQ(first.logprobs->top.size(), 3u);
  EXPECT_EQ(first.logprobs->top[0].id, first.token);  // greedy: the most likely one
  EXPECT_GE(first.logprobs->top[0].logprob, first.logprobs->top[1].logprob);
  EXPECT_GE(first.logprobs->top[1].logprob, first.logprobs->top[2].logprob);
}

}  // namespace
}  // namespace nvfp4lm::test::test_batch_engine
