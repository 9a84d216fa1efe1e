// BatchEngine with a grammar-constrained sequence (SequenceSpec::grammar; infer/constrain/): on the tiny random model,
// sampled at temperature 1 and greedy, with budgets from the shortest possible answer up, every answer is a value of
// the schema and ends as EndOfSequence within max_new_tokens; an unconstrained sequence beside it is untouched; a
// budget below the shortest answer is a one-line Error.
#include <gtest/gtest.h>

#include "infer/batch_engine.h"
#include "infer/constrain/grammar_constraint.h"
#include "infer/constrain/grammar_matcher.h"
#include "infer/constrain/json_schema.h"
#include "infer/generator.h"
#include "infer/qwen3_cached_lm.h"
#include "infer_test_util.h"
#include "model/qwen3_model.h"

namespace nvfp4lm::test::test_batch_engine_constrain {
namespace {

using nlohmann::json;

constexpr const char* kSchema = R"({"type":"object","properties":{
  "city":{"type":"string","maxLength":8},"days":{"type":"integer","minimum":1,"maximum":14},
  "tags":{"type":"array","items":{"type":"string","enum":["sun","rain"]},"maxItems":2}},"required":["city","days"]})";

const Qwen3Model& model() {
  static const Qwen3Model tiny = Qwen3Model::load(synth_tiny_model(7));
  return tiny;
}

SequenceSpec spec_for(const std::string& prompt, int64_t max_tokens, float temperature, uint64_t seed) {
  SequenceSpec spec;
  spec.prompt = qwen3_tokenizer().encode(prompt);
  spec.options.max_new_tokens = max_tokens;
  spec.options.sampling.temperature = temperature;
  spec.options.sampling.top_k = 0;
  spec.options.sampling.top_p = 1.0f;
  spec.options.sampling.seed = seed;
  spec.options.eos_ids = {qwen3_tokenizer().special_ids().im_end, qwen3_tokenizer().special_ids().endoftext};
  return spec;
}

struct Answer {
  std::vector<int32_t> tokens;
  std::string text;
  StopReason reason = StopReason::MaxTokens;
  bool finished = false;
};

std::vector<Answer> run_all(BatchEngine& engine, const std::vector<SequenceSpec>& specs) {
  std::vector<Answer> answers(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto sink = [&answers, i](const SequenceEvent& event) {
      answers[i].tokens.push_back(event.token);
      answers[i].text += event.text;
      answers[i].finished = event.finished;
      answers[i].reason = event.stop_reason;
    };
    engine.start(specs[i], sink);
  }
  while (engine.running() > 0)
    engine.step([&](const SequenceEvent& event) {
      // Sequence ids are 1, 2, ... in start order.
      Answer& answer = answers[static_cast<size_t>(event.sequence - 1)];
      answer.tokens.push_back(event.token);
      answer.text += event.text;
      answer.finished = event.finished;
      answer.reason = event.stop_reason;
    });
  return answers;
}

TEST(BatchEngineConstrain, EveryAnswerIsAValueOfTheSchemaWithinItsBudget) {
  const auto grammar = constrain::json_schema_grammar(json::parse(kSchema));
  const int32_t shortest = constrain::min_tokens(*grammar);
  BatchEngineOptions options;
  options.slots = 8;
  options.context = 128;
  BatchEngine engine(model(), qwen3_tokenizer(), options);
  std::vector<SequenceSpec> specs;
  for (int i = 0; i < 8; ++i) {
    SequenceSpec spec = spec_for("Plan a trip", shortest + i * 5, i == 7 ? 0.0f : 1.0f, static_cast<uint64_t>(i));
    spec.grammar = grammar;
    specs.push_back(spec);
  }
  const std::vector<Answer> answers = run_all(engine, specs);
  for (size_t i = 0; i < answers.size(); ++i) {
    const Answer& answer = answers[i];
    EXPECT_TRUE(answer.finished);
    EXPECT_EQ(answer.reason, StopReason::EndOfSequence) << answer.text;
    EXPECT_LE(static_cast<int64_t>(answer.tokens.size()), specs[i].options.max_new_tokens);
    EXPECT_TRUE(constrain::grammar_matches(grammar, answer.text)) << answer.text;
    const json value = json::parse(answer.text);
    EXPECT_TRUE(value["city"].is_string() && value["days"].is_number_integer()) << answer.text;
  }
}

TEST(BatchEngineConstrain, AnUnconstrainedNeighbourGetsWhatItGetsAlone) {
  BatchEngineOptions options;
  options.slots = 2;
  options.context = 96;
  BatchEngine engine(model(), qwen3_tokenizer(), options);
  SequenceSpec constrained = spec_for("Hello", 40, 1.0f, 3);
  constrained.grammar = constrain::json_object_grammar();
  const SequenceSpec plain = spec_for("The weather", 24, 1.0f, 5);
  const std::vector<Answer> answers = run_all(engine, {constrained, plain});
  EXPECT_TRUE(constrain::grammar_matches(constrained.grammar, answers[0].text)) << answers[0].text;
  Qwen3CachedLm lm(model(), options.context);
  GenerationOptions alone = plain.options;
  alone.token_choice = TokenChoicePlace::Host;
  Generator generator(lm, qwen3_tokenizer(), alone);
  EXPECT_EQ(answers[1].tokens, generator.generate(plain.prompt).tokens);
}

TEST(BatchEngineConstrain, ABudgetBelowTheShortestAnswerIsAnError) {
  BatchEngineOptions options;
  options.slots = 1;
  options.context = 64;
  BatchEngine engine(model(), qwen3_tokenizer(), options);
  SequenceSpec spec = spec_for("Hi", 5, 1.0f, 1);
  spec.grammar = constrain::json_schema_grammar(json::parse(kSchema));
  expect_error([&] { engine.check(spec); }, {"shortest answer takes", "only 5", "max tokens"});
}

}  // namespace
}  // namespace nvfp4lm::test::test_batch_engine_constrain
