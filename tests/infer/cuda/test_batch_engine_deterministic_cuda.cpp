// `--deterministic` on CUDA (ops/batch_invariance.h; the emulated device without a GPU): an answer's tokens and
// log-probabilities are bit for bit those Generator gives the request alone (a fresh cache, its decode graph),
// whatever the prefix cache held, how the prompt was chunked and which sequences shared the decode steps — the
// CPU's guarantee (tests/infer/test_batch_engine_prefill.cpp) on the GPU path, for a dense and an NVFP4 model.
// Without the mode, CUDA promises the same tokens up to rounding only (test_batch_engine_cuda.cpp).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "infer/batch_engine.h"
#include "infer/generator.h"
#include "infer/logprobs.h"
#include "infer/qwen3_cached_lm.h"
#include "io/model_files.h"
#include "io/quantize_model.h"
#include "model/qwen3_model.h"
#include "ops/batch_invariance.h"
#include "tokenizer/tokenizer_files.h"

namespace nvfp4lm::test::test_batch_engine_deterministic_cuda {
namespace {

constexpr int64_t kContext = 80;
constexpr int kTopLogprobs = 3;

const Tokenizer& tokenizer() {
  static const Tokenizer loaded = Tokenizer::load(bundled_qwen3_tokenizer_dir());
  return loaded;
}

const Qwen3Model& model_named(const std::string& name) {
  static std::map<std::string, Qwen3Model> loaded;
  if (auto found = loaded.find(name); found != loaded.end()) return found->second;
  ModelOptions options;
  options.device = Device::cuda(0);
  if (name == "dense") return loaded.emplace(name, Qwen3Model::load(synth_tiny_model(11), options)).first->second;
  static TempDir dir;
  quantize_model(*open_model(synth_tiny_model(11)), dir / "nvfp4", QuantizeOptions{});
  return loaded.emplace(name, Qwen3Model::load(dir / "nvfp4", options)).first->second;
}

struct Answer {
  std::vector<int32_t> tokens;
  std::vector<double> logprobs;  // per token: the chosen one's, then (id, logprob) of the top ones

  void add(int32_t token, const NextTokenLogprobs& next) {
    tokens.push_back(token);
    logprobs.push_back(next.chosen.logprob);
    for (const TokenLogprob& top : next.top) {
      logprobs.push_back(static_cast<double>(top.id));
      logprobs.push_back(top.logprob);
    }
  }
};

SequenceSpec greedy(const std::string& prompt, int64_t max_tokens) {
  SequenceSpec spec;
  spec.prompt = tokenizer().encode(prompt);
  spec.options.max_new_tokens = max_tokens;
  spec.options.sampling.temperature = 0;
  spec.top_logprobs = kTopLogprobs;
  return spec;
}

class DeterministicCuda : public ::testing::TestWithParam<std::string> {
 protected:
  const Qwen3Model& model() const { return model_named(GetParam()); }

  // Generator alone, decoding through its captured graph as `generate` does, the logprobs of its logits rows.
  Answer alone(const SequenceSpec& spec) const {
    Qwen3CachedLm lm(model(), kContext, {}, DecodeMode::Graph);
    GenerationOptions options = spec.options;
    options.token_choice = TokenChoicePlace::Host;
    Answer answer;
    const auto decodable = static_cast<int64_t>(tokenizer().vocab_size());
    options.on_token = [&](int32_t token, std::span<const float> logits) {
      answer.add(token, next_token_logprobs(logits, std::min<int64_t>(decodable, static_cast<int64_t>(logits.size())),
                                            token, kTopLogprobs));
    };
    Generator generator(lm, tokenizer(), options);
    EXPECT_EQ(generator.generate(spec.prompt).tokens, answer.tokens);
    return answer;
  }

  BatchInvariantKernels invariant_{true};
};

// The bytes of a tensor (logits F32, keys BF16), to compare bit for bit.
std::vector<uint8_t> bytes_of(const Tensor& t) {
  const Tensor host = t.to(Device::cpu()).contiguous();
  const auto* p = static_cast<const uint8_t*>(host.raw());
  return {p, p + host.nbytes()};
}

// The model itself: a prompt prefilled in chunks of 1, 7 and 33 tokens gives the last logits and the keys of the
// whole prompt at once, bit for bit.
TEST_P(DeterministicCuda, ChunkedLogitsEqualTheWholePrompt) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  const std::vector<int32_t> prompt = tokenizer().encode(
      "Once upon a time, in a land far away, there lived a king who had three sons and a daughter, and the daughter "
      "was the cleverest of them all.");
  const auto length = static_cast<int64_t>(prompt.size());
  ASSERT_GE(length, 34);
  const Tensor ids = Tensor::from_ints(prompt, Shape{1, length});
  KVCache whole_cache = model().make_cache(1, kContext);
  const std::vector<uint8_t> whole = bytes_of(model().forward_cached(ids, whole_cache));
  for (int64_t chunk : {1, 7, 33}) {
    KVCache chunked_cache = model().make_cache(1, kContext);
    Tensor logits;
    for (int64_t start = 0; start < length; start += chunk)
      logits =
          model().forward_cached(ids.narrow(1, start, std::min(chunk, length - start)).contiguous(), chunked_cache);
    EXPECT_EQ(bytes_of(logits), whole) << "chunks of " << chunk;
    EXPECT_EQ(bytes_of(chunked_cache.keys(1).narrow(1, 0, length)), bytes_of(whole_cache.keys(1).narrow(1, 0, length)))
        << "keys, chunks of " << chunk;
  }
}

// The serving engine: three requests decoded together in captured graphs, each prefilled in chunks of 5 with decode
// steps of the others in between, then the first again from the prefix cache (its last token recomputed) and a
// follow-up that continues it: every answer, tokens and logprobs, equals the request alone.
TEST_P(DeterministicCuda, BatchedChunkedAndCachedAnswersEqualEachAlone) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  BatchEngineOptions options;
  options.slots = 3;
  options.context = kContext;
  options.decode = DecodeMode::Graph;
  options.prefix_cache = true;
  BatchEngine engine(model(), tokenizer(), options);
  const std::vector<SequenceSpec> specs = {
      greedy("Hello", 6), greedy("The capital of France is", 4),
      greedy("Once upon a time, in a land far away, there lived a king who had three sons and a daughter, and the "
             "daughter was the cleverest of them all, so the king",
             5)};
  // Alone, the long prompt's attention takes the prefill kernel (over 32 query rows a kv head); its chunks of 5
  // would take the decode kernel without batch-invariant kernels.
  ASSERT_GT(specs[2].prompt.size(), 32u);
  std::vector<Answer> answers(specs.size());
  std::map<int64_t, size_t> index_of;
  auto sink = [&](const SequenceEvent& event) {
    ASSERT_TRUE(event.logprobs.has_value());
    answers[index_of.at(event.sequence)].add(event.token, *event.logprobs);
  };
  for (size_t i = 0; i < specs.size(); ++i) index_of[engine.begin(specs[i])] = i;
  while (engine.running() > 0) {
    engine.prefill(5, sink);
    engine.step(sink);
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    const Answer expected = alone(specs[i]);
    EXPECT_EQ(answers[i].tokens, expected.tokens) << "request " << i;
    EXPECT_EQ(answers[i].logprobs, expected.logprobs) << "request " << i;
  }

  // From the prefix cache: the third prompt again, and a follow-up that extends it.
  SequenceSpec follow = specs[2];
  follow.prompt.insert(follow.prompt.end(), answers[2].tokens.begin(), answers[2].tokens.begin() + 2);
  const std::vector<int32_t> more = tokenizer().encode(" and a queen");
  follow.prompt.insert(follow.prompt.end(), more.begin(), more.end());
  for (const SequenceSpec& spec : {specs[2], follow}) {
    Answer again;
    const int64_t id = engine.start(spec, [&](const SequenceEvent& event) { again.add(event.token, *event.logprobs); });
    EXPECT_GE(engine.last_reused_tokens(), static_cast<int64_t>(specs[2].prompt.size()) - 1);
    while (engine.running() > 0)
      engine.step([&](const SequenceEvent& event) {
        if (event.sequence == id) again.add(event.token, *event.logprobs);
      });
    const Answer expected = alone(spec);
    EXPECT_EQ(again.tokens, expected.tokens);
    EXPECT_EQ(again.logprobs, expected.logprobs);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, DeterministicCuda, ::testing::Values("dense", "nvfp4"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace nvfp4lm::test::test_batch_engine_deterministic_cuda
