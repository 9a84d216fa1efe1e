// `nvfp4lm eval` as a library (tools/eval.h) on the 512-token fixture model:
//  - its mean loss equals the loss `train` reports for the same data in one batch, to 1e-5 on the CPU: plain
//    training against the source model, and QAT (w4a16) against the NVFP4 ModelOpt quantization of it;
//  - over a text longer than --seq-len its perplexity is the sliding-window one, computed here directly: for every
//    token j, a forward over exactly the context the rule gives it (the tokens [k*S, j) with k = max(0, ceil((j + 1
//    - T) / S))), for strides 1, T/2 and T - 1;
//  - KL(M || M) is exactly 0 (and top-1 agreement 100%); KL of the NVFP4 export against its BF16 source is > 0;
//  - a reference with another vocabulary, shape or tokenizer, and empty data, are one-line errors.
#include <gtest/gtest.h>

#include <cmath>

#include "common/test_util.h"
#include "io/model_files.h"
#include "io/quantize_model.h"
#include "io/synth_model.h"
#include "model/qwen3_model.h"
#include "tokenizer/tokenizer.h"
#include "tools/eval.h"
#include "train/trainer.h"
#include "train/trainer_test_support.h"

namespace nvfp4lm::test_eval {
namespace {

using test::TempDir;

Qwen3Model load_tiny(const fs::path& path = test::tiny_model_dir()) {
  ModelOptions options;
  options.tokenizer_dir = test::tiny_tokenizer_dir();
  return Qwen3Model::load(path, options);
}

Tokenizer tiny_tokenizer() { return Tokenizer::load(test::tiny_tokenizer_dir()); }

fs::path quantize_tiny(const fs::path& out) {
  QuantizeOptions options;
  quantize_model(*open_model(test::tiny_model_dir()), out, options);
  return out;
}

// The loss of the first training step (before any update) with every sample in that one batch.
StepMetrics first_step(const fs::path& data, const fs::path& run, QatMode qat) {
  TrainOptions options = test::tiny_train_options(data, run);
  options.qat = qat;
  options.batch = 8;
  options.max_steps = 1;
  options.warmup = 0;
  Trainer trainer(options, {});
  return trainer.train_step();
}

TEST(Eval, MeanLossEqualsTheTrainingLossOfTheSameData) {
  TempDir dir;
  const fs::path data = test::write_pairs_jsonl(dir / "pairs.jsonl", 8);
  const Tokenizer tokenizer = tiny_tokenizer();
  EvalOptions options;
  options.data = data;

  const StepMetrics plain = first_step(data, dir / "run-plain", QatMode::Off);
  const Qwen3Model source = load_tiny();
  const EvalResult result = evaluate_model(source, tokenizer, nullptr, options);
  EXPECT_EQ(result.tokens, plain.loss_tokens);
  EXPECT_NEAR(result.loss, plain.loss, 1e-5) << "eval " << result.loss << " vs train " << plain.loss;
  EXPECT_NEAR(result.token_accuracy, plain.token_accuracy, 1.0 / static_cast<double>(plain.loss_tokens));
  EXPECT_NEAR(result.perplexity, std::exp(result.loss), 1e-9 * result.perplexity);

  // QAT trains the NVFP4 forward: its loss is the loss of the NVFP4 quantization of the same weights.
  const StepMetrics qat = first_step(data, dir / "run-qat", QatMode::W4A16);
  const Qwen3Model nvfp4 = load_tiny(quantize_tiny(dir / "nvfp4"));
  const EvalResult quantized = evaluate_model(nvfp4, tokenizer, nullptr, options);
  EXPECT_NEAR(quantized.loss, qat.loss, 1e-5) << "eval " << quantized.loss << " vs QAT train " << qat.loss;
  EXPECT_NE(quantized.loss, result.loss);
}

// -log p(ids[j] | ids[begin..j)) from one forward over exactly that context.
double direct_token_loss(const Qwen3Model& model, const std::vector<int32_t>& ids, int begin, int j) {
  const std::vector<int32_t> context(ids.begin() + begin, ids.begin() + j);
  const Tensor input = Tensor::from_ints(context, Shape{1, static_cast<int64_t>(context.size())});
  const Tensor logits = model.forward(input);
  const int64_t vocab = model.config().vocab_size;
  const float* row = logits.data<float>() + (static_cast<int64_t>(context.size()) - 1) * vocab;
  long double m = row[0], sum = 0;
  for (int64_t v = 0; v < vocab; ++v) m = std::max<long double>(m, row[v]);
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<long double>(row[v]) - m);
  return static_cast<double>(m + std::log(sum) - row[ids[static_cast<size_t>(j)]]);
}

TEST(Eval, SlidingWindowPerplexityMatchesADirectComputation) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 3; ++i)
    text += "The cat sat on the mat and looked at the moon, which was round and white. It was late. ";
  const fs::path data = dir / "story.txt";
  test::write_file(data, text);
  const Tokenizer tokenizer = tiny_tokenizer();
  const Qwen3Model model = load_tiny();
  std::vector<int32_t> ids = tokenizer.encode(text);
  ids.push_back(tokenizer.special_ids().endoftext);  // how read_dataset ends a text document
  const int n = static_cast<int>(ids.size()), seq_len = 20;
  ASSERT_GT(n, 4 * seq_len);

  for (int stride : {1, seq_len / 2, seq_len - 1}) {
    EvalOptions options;
    options.data = data;
    options.seq_len = seq_len;
    options.stride = stride;
    const EvalResult result = evaluate_model(model, tokenizer, nullptr, options);
    double sum = 0;
    for (int j = 1; j < n; ++j) {
      const int k = j + 1 - seq_len <= 0 ? 0 : (j + 1 - seq_len + stride - 1) / stride;
      sum += direct_token_loss(model, ids, k * stride, j);
    }
    const double direct = sum / (n - 1);
    EXPECT_EQ(result.tokens, n - 1) << "stride " << stride;
    EXPECT_NEAR(result.loss, direct, 1e-5) << "stride " << stride;
    EXPECT_NEAR(result.perplexity, std::exp(direct), 1e-5 * std::exp(direct)) << "stride " << stride;
    EXPECT_EQ(result.long_samples, 1);
  }
  // Less context, higher loss: one window per seq_len - 1 tokens vs a window per token.
  EvalOptions strided;
  strided.data = data;
  strided.seq_len = seq_len;
  EvalOptions full = strided;
  full.seq_len = n;
  EXPECT_NE(evaluate_model(model, tokenizer, nullptr, strided).loss,
            evaluate_model(model, tokenizer, nullptr, full).loss);
}

TEST(Eval, KlOfAModelWithItselfIsZeroAndOfItsNvfp4ExportPositive) {
  TempDir dir;
  const fs::path data = test::write_pairs_jsonl(dir / "pairs.jsonl", 6);
  const Tokenizer tokenizer = tiny_tokenizer();
  EvalOptions options;
  options.data = data;
  const Qwen3Model model = load_tiny(), same = load_tiny();
  const EvalResult self = evaluate_model(model, tokenizer, &same, options);
  ASSERT_TRUE(self.reference);
  EXPECT_EQ(self.reference->kl_mean, 0.0);
  EXPECT_EQ(self.reference->kl_max, 0.0);
  EXPECT_EQ(self.reference->top1_agreement, 1.0);
  EXPECT_EQ(self.reference->loss, self.loss);

  const Qwen3Model nvfp4 = load_tiny(quantize_tiny(dir / "nvfp4"));
  const EvalResult quantized = evaluate_model(nvfp4, tokenizer, &model, options);
  ASSERT_TRUE(quantized.reference);
  EXPECT_GT(quantized.reference->kl_mean, 0.0);
  EXPECT_GE(quantized.reference->kl_max, quantized.reference->kl_p99);
  EXPECT_GE(quantized.reference->kl_p99, quantized.reference->kl_median);
  EXPECT_LE(quantized.reference->top1_agreement, 1.0);
  EXPECT_NEAR(quantized.reference->loss, self.loss, 1e-12);
  const nlohmann::json json = eval_result_json(quantized);
  EXPECT_EQ(json["reference"]["kl_mean"].get<double>(), quantized.reference->kl_mean);
  EXPECT_NE(format_eval_result(quantized).find("KL(reference || model)"), std::string::npos);
}

TEST(Eval, AReferenceOfAnotherVocabularyShapeOrTokenizerIsAnError) {
  TempDir dir;
  const Qwen3Model model = load_tiny();
  const Tokenizer tokenizer = tiny_tokenizer();
  Qwen3Config config = model.config();
  config.vocab_size = 640;
  SynthOptions synth;
  synth.dtype = DType::F32;
  synth.bundled_tokenizer = false;
  synth_model(config, dir / "vocab", synth);
  test::expect_error([&] { check_reference_model(model, tokenizer, load_tiny(dir / "vocab"), nullptr); },
                     {"--reference", "640", "512", "vocabulary"});
  config = model.config();
  config.intermediate_size = 256;
  synth_model(config, dir / "shape", synth);
  test::expect_error([&] { check_reference_model(model, tokenizer, load_tiny(dir / "shape"), nullptr); },
                     {"--reference", "another shape", "intermediate 256", "intermediate 128"});
  if (const auto qwen3 = find_bundled_tokenizer()) {
    const Tokenizer other = Tokenizer::load(*qwen3);
    test::expect_error([&] { check_reference_model(model, tokenizer, model, &other); },
                       {"--reference", "another tokenizer"});
  }
  check_reference_model(model, tokenizer, model, &tokenizer);  // the same model is fine
}

TEST(Eval, EmptyDataIsAnError) {
  TempDir dir;
  test::write_file(dir / "empty.txt", "");
  EvalOptions options;
  options.data = dir / "empty.txt";
  test::expect_error([&] { evaluate_model(load_tiny(), tiny_tokenizer(), nullptr, options); },
                     {"empty.txt", "no sample to evaluate"});
  test::write_file(dir / "empty.jsonl", "\n\n");
  options.data = dir / "empty.jsonl";
  test::expect_error([&] { evaluate_model(load_tiny(), tiny_tokenizer(), nullptr, options); },
                     {"empty.jsonl", "no sample to evaluate"});
}

}  // namespace
}  // namespace nvfp4lm::test_eval
