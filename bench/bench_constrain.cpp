// The allowed-token mask of a constrained sequence (infer/constrain/grammar_constraint.h) on the real Qwen3
// vocabulary (models/qwen3-tokenizer, 151,643 tokens in the prefix tree): per generated token, at typical states of
// two schemas. "walk": the matcher's memo warm, the mask recomputed (one pass over the prefix tree); "kept": the
// mask of a state seen before (a long string, an array of like items); "cold": a new sequence's first mask, the
// memo empty. The ceiling to hold them against: a decode step (CPU tiny model ~1 ms; a 4B model on a GPU ~10 ms).
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include "infer/constrain/grammar_constraint.h"
#include "infer/constrain/json_schema.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace nvfp4lm;

constexpr const char* kPerson = R"({"type":"object","properties":{
  "name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150},
  "email":{"type":"string","maxLength":64},"tags":{"type":"array","items":{"type":"string"}}},
  "required":["name","age","email","tags"],"additionalProperties":false})";

const Tokenizer& tokenizer() {
  static const Tokenizer loaded = Tokenizer::load(NVFP4LM_SOURCE_DIR "/models/qwen3-tokenizer");
  return loaded;
}
const std::shared_ptr<const constrain::TokenTrie>& trie() {
  static const auto built = constrain::TokenTrie::from_tokenizer(tokenizer());
  return built;
}

std::shared_ptr<const constrain::Grammar> grammar_for(int schema) {
  static const auto person = constrain::json_schema_grammar(nlohmann::json::parse(kPerson));
  static const auto object = constrain::json_object_grammar();
  return schema == 0 ? person : object;
}

// Prefixes: 0 inside a string, 1 between keys, 2 in a number.
const char* prefix_for(int schema, int state) {
  static const char* person[] = {R"({"age": 31, "email": "ada@exa)", R"({"age": 31, )", R"({"age": 1)"};
  static const char* object[] = {R"({"note": "a long te)", R"({"a": [1, 2], )", R"({"x": 12.5)"};
  return (schema == 0 ? person : object)[state];
}

constrain::GrammarConstraint at_state(int schema, int state) {
  constrain::GrammarConstraint constraint(grammar_for(schema), trie(), {tokenizer().special_ids().im_end});
  for (int32_t id : tokenizer().encode(prefix_for(schema, state))) constraint.accept(id);
  return constraint;
}

void label(benchmark::State& bench, int schema, int state) {
  static const char* states[] = {"in string", "between keys", "in number"};
  bench.SetLabel(std::string(schema == 0 ? "person schema, " : "json_object, ") + states[state]);
}

void BM_MaskWalk(benchmark::State& bench) {
  const int schema = static_cast<int>(bench.range(0)), state = static_cast<int>(bench.range(1));
  auto constraint = at_state(schema, state);
  size_t allowed = 0;
  for (auto _ : bench) {
    constraint.forget_masks();
    const auto& bits = constraint.allowed_tokens(1000);
    benchmark::DoNotOptimize(bits.data());
  }
  for (uint64_t word : constraint.allowed_tokens(1000)) allowed += static_cast<size_t>(__builtin_popcountll(word));
  bench.counters["allowed_tokens"] = static_cast<double>(allowed);
  label(bench, schema, state);
}

void BM_MaskKept(benchmark::State& bench) {
  const int schema = static_cast<int>(bench.range(0)), state = static_cast<int>(bench.range(1));
  auto constraint = at_state(schema, state);
  std::vector<float> logits(tokenizer().vocab_size());
  for (auto _ : bench) {
    constraint.mask_logits(logits, 1000);  // the kept mask, applied to a row: what a token costs then
    benchmark::DoNotOptimize(logits.data());
  }
  label(bench, schema, state);
}

void BM_MaskCold(benchmark::State& bench) {
  const int schema = static_cast<int>(bench.range(0)), state = static_cast<int>(bench.range(1));
  for (auto _ : bench) {
    auto constraint = at_state(schema, state);
    benchmark::DoNotOptimize(constraint.allowed_tokens(1000).data());
  }
  label(bench, schema, state);
}

void states(benchmark::internal::Benchmark* bench) {
  for (int schema = 0; schema < 2; ++schema)
    for (int state = 0; state < 3; ++state) bench->Args({schema, state});
  bench->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_MaskWalk)->Apply(states);
BENCHMARK(BM_MaskKept)->Apply(states);
BENCHMARK(BM_MaskCold)->Apply(states);

}  // namespace

BENCHMARK_MAIN();
