// BatchEngine on CUDA (the emulated device without a GPU): sequences decoded together in captured graphs per batch
// bucket (padding rows in the spare slot) and eagerly get exactly the tokens `generate` gives each alone on CUDA
// (Generator over Qwen3CachedLm with its decode graph, tokens chosen on the device), for a dense and an NVFP4 tiny
// model, with sequences joining and leaving between steps; a prompt prefilled in chunks while another sequence
// decodes, and one continuing a cached prefix, get the same greedy tokens too.
#include <gtest/gtest.h>

#include <map>

#include "common/test_util.h"
#include "infer/batch_engine.h"
#include "infer/generator.h"
#include "infer/qwen3_cached_lm.h"
#include "io/model_files.h"
#include "io/quantize_model.h"
#include "model/qwen3_model.h"
#include "tokenizer/tokenizer_files.h"

namespace nvfp4lm::test::test_batch_engine_cuda {
namespace {

constexpr int64_t kContext = 80;

const Tokenizer& tokenizer() {
  static const Tokenizer loaded = Tokenizer::load(bundled_qwen3_tokenizer_dir());
  return loaded;
}

const fs::path& tiny_dir() { return synth_tiny_model(11); }

ModelOptions on_gpu() {
  ModelOptions options;
  options.device = Device::cuda(0);
  return options;
}

std::vector<int32_t> alone(const Qwen3Model& model, const SequenceSpec& spec) {
  Qwen3CachedLm lm(model, kContext, {}, DecodeMode::Graph);
  Generator generator(lm, tokenizer(), spec.options);
  return generator.generate(spec.prompt).tokens;
}

void expect_batched_like_alone(const Qwen3Model& model, DecodeMode mode, const std::string& what) {
  const std::vector<std::string> prompts = {"Hello", "The capital of France is", "1, 2, 3,",
                                            "def f(x):", "Once upon a time"};
  const std::vector<int> joins = {0, 0, 1, 2, 4};
  std::vector<SequenceSpec> specs;
  for (size_t i = 0; i < prompts.size(); ++i) {
    SequenceSpec spec;
    spec.prompt = tokenizer().encode(prompts[i]);
    spec.options.max_new_tokens = 4 + static_cast<int64_t>(i % 3);
    spec.options.sampling.temperature = 0;
    specs.push_back(spec);
  }
  BatchEngineOptions options;
  options.slots = 4;
  options.context = kContext;
  options.decode = mode;
  BatchEngine engine(model, tokenizer(), options);
  std::vector<std::vector<int32_t>> tokens(specs.size());
  std::map<int64_t, size_t> index_of;
  for (int step = 0;; ++step) {
    for (size_t i = 0; i < specs.size(); ++i) {
      if (joins[i] != step) continue;
      ASSERT_TRUE(engine.has_free_slot()) << what;
      index_of[engine.start(specs[i], [&, i](const SequenceEvent& event) { tokens[i].push_back(event.token); })] = i;
    }
    if (engine.running() == 0 && step >= joins.back()) break;
    engine.step([&](const SequenceEvent& event) { tokens[index_of.at(event.sequence)].push_back(event.token); });
  }
  for (size_t i = 0; i < specs.size(); ++i) EXPECT_EQ(tokens[i], alone(model, specs[i])) << what << ": sequence " << i;
  if (mode == DecodeMode::Graph) {
    EXPECT_NE(engine.decode_path().find("captured"), std::string::npos) << engine.decode_path();
  }
}

TEST(BatchEngineCuda, BatchedGreedyEqualsGenerateAlone) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  const Qwen3Model dense = Qwen3Model::load(tiny_dir(), on_gpu());
  expect_batched_like_alone(dense, DecodeMode::Graph, "dense, graphs");
  TempDir dir;
  quantize_model(*open_model(tiny_dir()), dir / "nvfp4", QuantizeOptions{});
  const Qwen3Model nvfp4 = Qwen3Model::load(dir / "nvfp4", on_gpu());
  ASSERT_EQ(nvfp4.compute_path(), "cuda/nvfp4-w4a16");
  expect_batched_like_alone(nvfp4, DecodeMode::Graph, "NVFP4, graphs");
  expect_batched_like_alone(nvfp4, DecodeMode::Eager, "NVFP4, eager");
}

// Chunks of 8 tokens appended at the slot's length (attention from a query offset on the device), steps of a
// running sequence in between, then the same prompt from the prefix cache (its last token computed alone).
TEST(BatchEngineCuda, ChunkedPrefillAndPrefixHitEqualGenerateAlone) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  const Qwen3Model dense = Qwen3Model::load(tiny_dir(), on_gpu());
  BatchEngineOptions options;
  options.slots = 2;
  options.context = kContext;
  options.decode = DecodeMode::Graph;
  options.prefix_cache = true;
  BatchEngine engine(dense, tokenizer(), options);
  SequenceSpec running, joining;
  running.prompt = tokenizer().encode("Hello");
  joining.prompt = tokenizer().encode("Once upon a time, in a land far away, there lived a king who had three sons");
  running.options.max_new_tokens = 8;
  joining.options.max_new_tokens = 3;
  running.options.sampling.temperature = joining.options.sampling.temperature = 0;
  ASSERT_GT(joining.prompt.size(), 16u);
  std::vector<int32_t> running_tokens, joining_tokens;
  const int64_t running_id =
      engine.start(running, [&](const SequenceEvent& event) { running_tokens.push_back(event.token); });
  engine.begin(joining);
  auto sink = [&](const SequenceEvent& event) {
    (event.sequence == running_id ? running_tokens : joining_tokens).push_back(event.token);
  };
  while (engine.running() > 0) {
    engine.prefill(8, sink);
    engine.step(sink);
  }
  EXPECT_EQ(running_tokens, alone(dense, running));
  EXPECT_EQ(joining_tokens, alone(dense, joining));
  std::vector<int32_t> again;
  engine.start(joining, [&](const SequenceEvent& event) { again.push_back(event.token); });
  EXPECT_EQ(engine.last_reused_tokens(), static_cast<int64_t>(joining.prompt.size()) - 1);
  while (engine.running() > 0) engine.step([&](const SequenceEvent& event) { again.push_back(event.token); });
  EXPECT_EQ(again, joining_tokens);
}

}  // namespace
}  // namespace nvfp4lm::test::test_batch_engine_cuda
