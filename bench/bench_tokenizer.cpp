// Tokenizer micro-benchmarks (Google Benchmark), on the bundled Qwen3 tokenizer:
//  - encode MB/s on 1 MB texts: the mixed fixture corpus (every script, code, emoji, whitespace), English
//    prose only, Chinese only; "cold" clears nothing but builds a fresh Tokenizer per iteration, so the
//    word cache starts empty (that number includes the load, reported separately below).
//  - the ceiling each is measured against: the pre-tokenizer regex alone (PCRE2, the part encode cannot
//    avoid) and UTF-8 validation (a pass over the bytes).
//  - decode MB/s (of output text), tokenizer.json load time.
// Run: bench_tokenizer --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace nvfp4lm {
namespace {

constexpr size_t kTextBytes = 1 << 20;

const Tokenizer& qwen3() {
  static const Tokenizer tokenizer = Tokenizer::load(bundled_qwen3_tokenizer_dir());
  return tokenizer;
}

std::vector<std::string> corpus_texts(const std::string& category) {
  std::ifstream in(std::string(NVFP4LM_SOURCE_DIR) + "/tests/fixtures/tokenizer/corpus.jsonl");
  std::vector<std::string> texts;
  std::string line;
  while (std::getline(in, line)) {
    auto row = nlohmann::json::parse(line);
    if (category.empty() || row["category"] == category) texts.push_back(row["text"].get<std::string>());
  }
  return texts;
}

// ~1 MB made by repeating texts, each followed by a newline.
std::string make_text(const std::vector<std::string>& texts) {
  std::string out;
  for (size_t i = 0; out.size() < kTextBytes; ++i) out += texts[i % texts.size()] + "\n";
  return out;
}

const std::string& mixed_text() {
  static const std::string text = make_text(corpus_texts(""));
  return text;
}

const std::string& english_text() {
  static const std::string text = [] {
    std::vector<std::string> words = {"the",    "model",  "is",    "trained", "on",     "a",  "large",
                                      "corpus", "of",     "text",  "and",     "learns", "to", "predict",
                                      "next",   "token,", "which", "works",   "well."};
    std::vector<std::string> sentences;
    uint32_t state = 12345;
    for (int s = 0; s < 500; ++s) {
      std::string sentence;
      for (int w = 0; w < 12; ++w) {
        state = state * 1664525u + 1013904223u;
        sentence += (w ? " " : "") + words[(state >> 16) % words.size()];
      }
      sentences.push_back(sentence);
    }
    return make_text(sentences);
  }();
  return text;
}

const std::string& chinese_text() {
  static const std::string text = make_text(corpus_texts("cjk"));
  return text;
}

void set_rate(benchmark::State& state, size_t bytes) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
  state.counters["MB/s"] =
      benchmark::Counter(static_cast<double>(bytes) / 1e6, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Encode(benchmark::State& state, const std::string& (*text)()) {
  const Tokenizer& tok = qwen3();
  const std::string& input = text();
  size_t tokens = 0;
  for (auto _ : state) {
    std::vector<int32_t> ids = tok.encode(input);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  set_rate(state, input.size());
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["bytes/token"] = static_cast<double>(input.size()) / static_cast<double>(tokens);
}
BENCHMARK_CAPTURE(BM_Encode, mixed_1MB, &mixed_text)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, english_1MB, &english_text)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, chinese_1MB, &chinese_text)->Unit(benchmark::kMillisecond);

// Fresh tokenizer each iteration (empty word cache); includes the load time.
void BM_EncodeColdCacheWithLoad(benchmark::State& state) {
  const std::string& input = mixed_text();
  for (auto _ : state) {
    Tokenizer tok = Tokenizer::load(bundled_qwen3_tokenizer_dir());
    benchmark::DoNotOptimize(tok.encode(input).data());
  }
  set_rate(state, input.size());
}
BENCHMARK(BM_EncodeColdCacheWithLoad)->Unit(benchmark::kMillisecond)->Iterations(3);

// Ceiling: the pre-tokenizer regex alone over the same text.
void BM_PretokenizeOnly(benchmark::State& state) {
  tokenizer::RegexSplitter splitter(tokenizer::kQwen2Pattern, "bench");
  const std::string& input = mixed_text();
  std::vector<tokenizer::Piece> pieces;
  for (auto _ : state) {
    pieces.clear();
    splitter.split(input, pieces);
    benchmark::DoNotOptimize(pieces.data());
  }
  set_rate(state, input.size());
  state.counters["jit"] = splitter.jit() ? 1 : 0;
}
BENCHMARK(BM_PretokenizeOnly)->Unit(benchmark::kMillisecond);

void BM_ValidateUtf8(benchmark::State& state) {
  const std::string& input = mixed_text();
  for (auto _ : state) benchmark::DoNotOptimize(tokenizer::find_invalid_utf8(input));
  set_rate(state, input.size());
}
BENCHMARK(BM_ValidateUtf8)->Unit(benchmark::kMillisecond);

void BM_Decode(benchmark::State& state) {
  const Tokenizer& tok = qwen3();
  std::vector<int32_t> ids = tok.encode(mixed_text());
  for (auto _ : state) benchmark::DoNotOptimize(tok.decode(ids).data());
  set_rate(state, mixed_text().size());
}
BENCHMARK(BM_Decode)->Unit(benchmark::kMillisecond);

void BM_LoadTokenizerJson(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(Tokenizer::load(bundled_qwen3_tokenizer_dir()).vocab_size());
}
BENCHMARK(BM_LoadTokenizerJson)->Unit(benchmark::kMillisecond)->Iterations(5);

}  // namespace
}  // namespace nvfp4lm

BENCHMARK_MAIN();
