// Generation with the real (tiny, random) Qwen3 model: greedy tokens through the KV cache equal a manual loop of
// full forward passes; chat turns that reuse and truncate the cache equal a fresh run of the whole conversation;
// the decode weight bytes.
#include <gtest/gtest.h>

#include "core/memory.h"
#include "infer/chat_session.h"
#include "infer/generator.h"
#include "infer/qwen3_cached_lm.h"
#include "infer/stop_conditions.h"
#include "infer_test_util.h"
#include "io/synth_model.h"
#include "model/qwen3_model.h"

namespace nvfp4lm::test::test_qwen3_generation {
namespace {

// One tiny model (bundled tokenizer copied in) for the whole file.
const Qwen3Model& tiny_model() {
  static TempDir dir;
  static const Qwen3Model model = [] {
    SynthOptions options;
    options.seed = 5;
    synth_model(qwen3_preset("tiny"), dir / "tiny", options);
    return Qwen3Model::load(dir / "tiny");
  }();
  return model;
}

// Greedy continuation by full forward passes over the growing sequence (no cache), over the tokenizer's ids.
std::vector<int32_t> manual_greedy(const Qwen3Model& model, std::vector<int32_t> ids, int64_t count) {
  const int64_t decodable = static_cast<int64_t>(qwen3_tokenizer().vocab_size());
  const int64_t vocab = model.config().vocab_size;
  std::vector<int32_t> generated;
  for (int64_t step = 0; step < count; ++step) {
    const int64_t tokens = static_cast<int64_t>(ids.size());
    const Tensor logits = model.forward(Tensor::from_ints(ids, Shape{1, tokens}));
    const float* last = logits.data<float>() + (tokens - 1) * vocab;
    const int32_t next = static_cast<int32_t>(std::max_element(last, last + decodable) - last);
    generated.push_back(next);
    ids.push_back(next);
  }
  return generated;
}

TEST(Qwen3Generation, GreedyThroughTheCacheEqualsFullForwardPasses) {
  const Qwen3Model& model = tiny_model();
  const std::vector<int32_t> prompt = qwen3_tokenizer().encode("The quick brown fox jumps over");
  Qwen3CachedLm lm(model, 64);
  GenerationOptions options;
  options.max_new_tokens = 12;
  options.sampling.temperature = 0;  // no EOS ids: exactly 12 tokens
  Generator generator(lm, qwen3_tokenizer(), options);
  const GenerationResult result = generator.generate(prompt);
  EXPECT_EQ(result.tokens, manual_greedy(model, prompt, 12));
  EXPECT_EQ(result.text, qwen3_tokenizer().decode(result.tokens, true));
  EXPECT_EQ(lm.length(), static_cast<int64_t>(prompt.size()) + 11);
  EXPECT_EQ(lm.cache().length(), lm.length());
  // The CPU model keeps its BF16 embedding as the file stores it (qwen3_weights.cpp), so the allocations the
  // generation tracks are the activations and the KV cache, not the weights.
  EXPECT_GT(result.stats.peak_device_bytes, 0u);
}

TEST(Qwen3Generation, ChatTurnsReuseTheCacheAndMatchAFreshRun) {
  const Qwen3Model& model = tiny_model();
  ChatSessionOptions options;
  options.generation.max_new_tokens = 6;
  options.generation.sampling.temperature = 0;
  options.generation.eos_ids = end_of_sequence_ids(model.config(), std::nullopt, qwen3_tokenizer(), 151936);
  options.system_prompt = "You are a test.";
  Qwen3CachedLm lm(model, 512);
  ChatSession session(lm, qwen3_tokenizer(), options);
  // The third turn comes after a /reset: the cache holds a longer conversation than the new prompt shares.
  const std::vector<std::string> turns = {"Hello there", "Tell me more", "", "Hello there"};
  bool first = true;
  for (const std::string& user : turns) {
    if (user.empty()) {
      session.reset();
      continue;
    }
    const std::vector<int32_t> prompt = session.prompt_ids(user);
    Qwen3CachedLm fresh_lm(model, 512);
    Generator fresh(fresh_lm, qwen3_tokenizer(), options.generation);
    const GenerationResult expected = fresh.generate(prompt);
    const GenerationResult result = session.reply(user);
    EXPECT_EQ(result.tokens, expected.tokens) << user;
    // After the first turn, the system prompt at least is reused.
    if (!first) {
      EXPECT_GT(result.stats.cached_tokens, 0) << user;
    }
    first = false;
  }
}

// Choosing tokens where the logits live (CachedLm::append_choose, what generation does on CUDA) runs on the CPU
// too: greedy picks the same tokens as the host sampler, also through the fixed-buffer decode step; sampling is a
// pure function of the seed and stays inside the tokenizer's ids; settings the model-side choice cannot honour are
// an Error; Auto keeps the host sampler on the CPU.
TEST(Qwen3Generation, ChoosingTokensInTheModel) {
  const Qwen3Model& model = tiny_model();
  const std::vector<int32_t> prompt = qwen3_tokenizer().encode("The quick brown fox jumps over");
  GenerationOptions options;
  options.max_new_tokens = 10;
  options.sampling.temperature = 0;
  auto run = [&](TokenChoicePlace place, std::optional<DecodeMode> decode) {
    Qwen3CachedLm lm(model, 64, {}, decode);
    GenerationOptions o = options;
    o.token_choice = place;
    Generator generator(lm, qwen3_tokenizer(), o);
    return generator.generate(prompt);
  };
  const GenerationResult host = run(TokenChoicePlace::Host, std::nullopt);
  EXPECT_FALSE(host.chosen_by_model);
  for (const std::optional<DecodeMode> decode : {std::optional<DecodeMode>(), std::optional(DecodeMode::Eager)}) {
    const GenerationResult in_model = run(TokenChoicePlace::Model, decode);
    EXPECT_TRUE(in_model.chosen_by_model);
    EXPECT_EQ(in_model.tokens, host.tokens);
  }
  EXPECT_FALSE(run(TokenChoicePlace::Auto, std::nullopt).chosen_by_model);  // CPU: host sampler

  options.sampling = SamplingOptions{};  // temperature 0.7, top-k 20, top-p 0.8
  options.sampling.seed = 3;
  const GenerationResult a = run(TokenChoicePlace::Model, DecodeMode::Eager);
  const GenerationResult b = run(TokenChoicePlace::Model, std::nullopt);
  EXPECT_EQ(a.tokens, b.tokens);
  ASSERT_EQ(a.tokens.size(), 10u);
  for (int32_t token : a.tokens) EXPECT_LT(token, static_cast<int32_t>(qwen3_tokenizer().vocab_size()));

  options.sampling.repetition_penalty = 1.1f;
  expect_error([&] { run(TokenChoicePlace::Model, std::nullopt); }, {"--repetition-penalty"});
}

TEST(Qwen3Generation, DecodeWeightBytes) {
  const Qwen3Model& model = tiny_model();
  const Qwen3Config& c = model.config();
  // Dense on the CPU: every projection and norm in F32; the (tied) lm_head and one embedding row in BF16, as the
  // file stores the embedding (qwen3_weights.cpp).
  const int64_t per_layer =
      c.attention_parameters_per_layer() + c.mlp_parameters_per_layer() + c.norm_parameters_per_layer();
  const int64_t f32_elements = c.num_hidden_layers * per_layer + c.hidden_size;
  const int64_t bf16_elements = c.vocab_size * c.hidden_size + c.hidden_size;
  EXPECT_EQ(decode_weight_bytes(model.weights()), static_cast<uint64_t>(f32_elements * 4 + bf16_elements * 2));
}

}  // namespace
}  // namespace nvfp4lm::test::test_qwen3_generation
