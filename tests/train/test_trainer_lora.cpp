// LoRA runs (train --lora, model/lora.h) through the training loop:
//  - the fixture model learns four prompt/completion pairs with rank-8 adapters over its NVFP4-quantized base, whose
//    file is not changed by the run;
//  - the checkpoints hold only the adapters; --export writes them in PEFT's format, checked field by field against
//    what PEFT's save_pretrained writes (adapter_config.json keys and values, tensor names, shapes, dtype, metadata),
//    and `export` of the run's checkpoint writes the same adapter;
//  - the flags that cannot go with --lora are refused with the fix.
// (Resume of a LoRA run: test_trainer_resume.cpp's "lora" case.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/test_util.h"
#include "core/numeric.h"
#include "io/peft_adapter.h"
#include "io/safetensors_reader.h"
#include "quant/nvfp4.h"
#include "tools/eval.h"
#include "train/export.h"
#include "train/lora_merge.h"
#include "train/merge_qat.h"
#include "train/trainer.h"
#include "train/trainer_test_support.h"

namespace nvfp4lm::test_trainer_lora {
namespace {

using json = nlohmann::json;

// The fixture model as an NVFP4 (ModelOpt) base whose embedding and lm_head are `sharpen` times larger: the fixture's
// random head (initializer range 0.02) gives logits within about ±1, so no hidden state can make one token likely and
// adapters, which leave the head frozen, could not fit anything; a trained model's head has the range (what the
// distillation tests do to their teacher, too).
fs::path nvfp4_base(const test::TempDir& dir, float sharpen) {
  TrainModelOptions frozen;
  frozen.qat = QatMode::Off;
  frozen.train_last_layers = 0;
  Qwen3Trainable model = Qwen3Trainable::from_files(*open_model(test::tiny_model_dir()), frozen);
  for (const NamedTensor& master : model.master_weights()) {
    if (master.name != "model.embed_tokens.weight" && master.name != "lm_head.weight") continue;
    float* v = master.tensor.data<float>();
    for (int64_t i = 0; i < master.tensor.numel(); ++i) v[i] *= sharpen;
  }
  ExportSource source;
  source.config_json = json::parse(test::read_file(test::tiny_model_dir() / "config.json"));
  ExportOptions options;
  options.format = ModelFormat::ModeloptNvfp4;
  export_weights(model.master_weights(), source, dir / "base-nvfp4", options);
  return dir / "base-nvfp4";
}

TrainOptions lora_run(const test::TempDir& dir, const fs::path& base) {
  const fs::path data = test::write_pairs_jsonl(dir / "pairs.jsonl", 4);
  TrainOptions options = test::tiny_train_options(data, dir / "run");
  options.model = base.string();
  options.lora_rank = 8;
  options.lora_alpha = 16;
  options.max_steps = 30;
  options.lr = 2e-2;
  options.warmup = 3;
  options.weight_decay = 0;
  options.export_path = (dir / "adapter").string();
  return options;
}

TEST(TrainerLora, LearnsThePairsOverAFrozenNvfp4BaseAndExportsAPeftAdapter) {
  test::TempDir dir;
  const fs::path base = nvfp4_base(dir, 30.0f);
  const std::string base_bytes = test::read_file(base / "model.safetensors");
  TrainOptions options = lora_run(dir, base);
  Trainer trainer(options, {});
  const auto [summary, steps] = test::run_recording_steps(trainer);
  ASSERT_EQ(steps.size(), 30u);
  const double first = (steps[0].loss + steps[1].loss) / 2;
  const double last = (steps[28].loss + steps[29].loss) / 2;
  std::fprintf(stderr, "LoRA rank 8 over the NVFP4 base: loss %.4f -> %.4f, accuracy %.3f\n", first, last,
               steps[29].token_accuracy);
  EXPECT_LT(last, first / 4) << "loss " << first << " -> " << last;
  EXPECT_TRUE(test::read_file(base / "model.safetensors") == base_bytes) << "the base model file changed";

  // The checkpoint: the adapters and nothing else.
  const auto checkpoint = SafetensorsFile::open(dir / "run" / "step-30" / kModelFileName);
  const std::vector<NamedTensor> masters = trainer.model().master_weights();
  EXPECT_EQ(checkpoint->entries().size(), 28u);
  EXPECT_EQ(masters.size(), 28u);

  // adapter_config.json as peft.LoraConfig.to_dict() writes it.
  ASSERT_TRUE(summary.export_report.has_value());
  EXPECT_TRUE(summary.export_report->lora_adapter);
  const json config = json::parse(test::read_file(dir / "adapter" / kPeftConfigFileName));
  EXPECT_EQ(config.at("peft_type"), "LORA");
  EXPECT_EQ(config.at("task_type"), "CAUSAL_LM");
  EXPECT_EQ(config.at("base_model_name_or_path"), fs::absolute(base).string());
  EXPECT_EQ(config.at("r"), 8);
  EXPECT_EQ(config.at("lora_alpha").get<double>(), 16.0);
  EXPECT_EQ(config.at("lora_dropout").get<double>(), 0.0);
  EXPECT_EQ(config.at("target_modules"),
            json({"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}));
  EXPECT_EQ(config.at("bias"), "none");
  EXPECT_EQ(config.at("fan_in_fan_out"), false);
  EXPECT_EQ(config.at("inference_mode"), true);
  EXPECT_EQ(config.at("use_rslora"), false);
  EXPECT_EQ(config.at("use_dora"), false);
  EXPECT_EQ(config.at("init_lora_weights"), true);
  EXPECT_TRUE(config.at("modules_to_save").is_null());
  EXPECT_TRUE(config.at("layers_to_transform").is_null());
  EXPECT_EQ(config.at("rank_pattern"), json::object());
  EXPECT_EQ(config.at("alpha_pattern"), json::object());

  // adapter_model.safetensors: PEFT's names (no adapter name), [r, in] and [out, r], F32, the trained values.
  const auto weights = SafetensorsFile::open(dir / "adapter" / kPeftWeightsFileName);
  EXPECT_EQ(weights->metadata().at("format"), "pt");
  ASSERT_EQ(weights->entries().size(), 28u);
  const auto reference = SafetensorsFile::open(test::tiny_model_dir() / "model.safetensors");
  for (const NamedTensor& master : masters) {
    SCOPED_TRACE(master.name);
    const Tensor stored = weights->tensor(master.name);
    EXPECT_EQ(stored.dtype(), DType::F32);
    const bool is_a = master.name.ends_with(".lora_A.weight");
    const std::string module = master.name.substr(
        std::string("base_model.model.").size(),
        master.name.size() - std::string("base_model.model.").size() - std::string(".lora_A.weight").size());
    const Shape base_shape = reference->tensor(module + ".weight").shape();
    EXPECT_EQ(stored.shape(), is_a ? Shape({8, base_shape[1]}) : Shape({base_shape[0], 8}));
    EXPECT_TRUE(test::tensor_bytes(std::vector<NamedTensor>{{master.name, stored}}) ==
                test::tensor_bytes(std::vector<NamedTensor>{master}));
  }

  // `nvfp4lm export RUN OUT` of the run's checkpoint: the same adapter.
  const CheckpointExportInput input = open_checkpoint_for_export(dir / "run");
  ASSERT_EQ(input.run_options.lora_rank, 8);
  export_lora_adapter(load_checkpoint_masters(input), input.run_options,
                      parse_qwen3_config(input.source.config_json, "config"), input.source, dir / "again", false);
  EXPECT_TRUE(test::read_file(dir / "again" / kPeftWeightsFileName) ==
              test::read_file(dir / "adapter" / kPeftWeightsFileName));
  EXPECT_TRUE(test::read_file(dir / "again" / kPeftConfigFileName) ==
              test::read_file(dir / "adapter" / kPeftConfigFileName));
  // An existing adapter directory is replaced only with overwrite.
  EXPECT_THROW(
      export_lora_adapter(load_checkpoint_masters(input), input.run_options,
                          parse_qwen3_config(input.source.config_json, "config"), input.source, dir / "again", false),
      Error);
  export_lora_adapter(load_checkpoint_masters(input), input.run_options,
                      parse_qwen3_config(input.source.config_json, "config"), input.source, dir / "again", true);
}

// `export --merge-lora --format bf16`: every adapted linear is exactly round_bf16(round_f32(W + 2 · B · A)) with the
// sum in double (W the base's NVFP4 weight dequantized), every other weight the base's rounded to BF16; and the merged
// model computes what the LoRA model did (its loss on the pairs within BF16 rounding).
TEST(TrainerLora, AMergedBf16ExportIsTheBasePlusTheScaledProductExactly) {
  test::TempDir dir;
  const fs::path base = nvfp4_base(dir, 30.0f);
  TrainOptions options = lora_run(dir, base);
  options.max_steps = 12;
  options.export_path.clear();
  Trainer trainer(options, {});
  trainer.run({});

  const CheckpointExportInput input = open_checkpoint_for_export(dir / "run");
  const std::unique_ptr<ModelFiles> base_files = open_model(base);
  const MergedModel merged = merge_lora_adapters(*base_files, load_checkpoint_masters(input), input.run_options);
  EXPECT_EQ(merged.merged_linears, 14);
  ExportOptions bf16;
  bf16.format = ModelFormat::HfSafetensors;
  export_checkpoint(input, dir / "merged", bf16, std::span<const NamedTensor>(merged.masters));

  const auto exported = SafetensorsFile::open(dir / "merged" / "model.safetensors");
  const auto adapters = SafetensorsFile::open(dir / "run" / "step-12" / kModelFileName);
  int checked = 0;
  for (const SafetensorsEntry& entry : exported->entries()) {
    SCOPED_TRACE(entry.name);
    const Tensor got = exported->tensor(entry);
    ASSERT_EQ(got.dtype(), DType::BF16);
    const ModelWeight stored = base_files->load(entry.name);
    const Tensor w = stored.is_nvfp4() ? dequantize_nvfp4(stored.nvfp4, DType::F32) : stored.dense;
    const bool adapted = entry.name.find("model.layers.") == 0 && w.rank() == 2;
    Tensor a, b;
    if (adapted) {
      a = adapters->tensor(lora_a_name(entry.name));
      b = adapters->tensor(lora_b_name(entry.name));
    }
    const int64_t cols = w.rank() == 2 ? w.dim(1) : w.numel();
    const uint16_t* bits = static_cast<const uint16_t*>(got.raw());
    int64_t mismatches = 0;
    for (int64_t i = 0; i < w.numel(); ++i) {
      double value = w.data<float>()[i];
      if (adapted) {
        double sum = 0;
        const int64_t o = i / cols, j = i % cols;
        for (int64_t k = 0; k < 8; ++k)
          sum += static_cast<double>(b.data<float>()[o * 8 + k]) * a.data<float>()[k * cols + j];
        value += 2.0 * sum;
      }
      mismatches += bits[i] != float_to_bf16(static_cast<float>(value)) ? 1 : 0;
    }
    EXPECT_EQ(mismatches, 0);
    ++checked;
  }
  EXPECT_EQ(checked, 2 * 11 + 3);

  // The merged model's loss equals the LoRA model's (its adapters loaded from the checkpoint) on one batch, up to the
  // BF16 rounding of the merged weights.
  TrainBatch batch;
  const auto reference = SafetensorsFile::open(test::tiny_model_dir() / "reference.safetensors");
  batch.ids = reference->tensor("input_ids").clone();
  batch.targets = reference->tensor("targets").clone();
  TrainModelOptions lora_options;
  lora_options.lora.rank = 8;
  lora_options.lora.alpha = 16;
  Qwen3Trainable lora = Qwen3Trainable::from_files(*base_files, lora_options);
  for (Parameter& p : lora.parameters()) p.value.copy_from(adapters->tensor(p.name));
  lora.refresh_quantized();
  TrainModelOptions frozen;
  frozen.qat = QatMode::Off;
  frozen.train_last_layers = 0;
  Qwen3Trainable whole = Qwen3Trainable::from_files(*open_model(dir / "merged"), frozen);
  const double lora_loss = lora.evaluate(batch).mean(), merged_loss = whole.evaluate(batch).mean();
  std::fprintf(stderr, "LoRA model loss %.5f, merged BF16 model %.5f\n", lora_loss, merged_loss);
  EXPECT_NEAR(merged_loss, lora_loss, 0.02 * lora_loss);

  // The cost of an NVFP4 merge (the merged weights quantized again), measured on the fixture's batch
  // against the BF16 merge: mean KL(BF16 merge ‖ NVFP4 merge) per position and top-1 agreement. Printed for the notes;
  // bounded loosely (the re-quantization is a 4-bit rounding of every merged weight).
  ExportOptions nvfp4;
  nvfp4.format = ModelFormat::ModeloptNvfp4;
  export_checkpoint(input, dir / "merged-nvfp4", nvfp4, std::span<const NamedTensor>(merged.masters));
  const Tensor ids = batch.ids;
  const Tensor p = whole.inference_model().forward(ids);
  const Tensor q = Qwen3Trainable::from_files(*open_model(dir / "merged-nvfp4"), frozen).inference_model().forward(ids);
  const int64_t vocab = p.dim(2), positions = p.numel() / vocab;
  double kl = 0;
  int64_t agree = 0;
  for (int64_t t = 0; t < positions; ++t) {
    const float* zp = p.data<float>() + t * vocab;
    const float* zq = q.data<float>() + t * vocab;
    double max_p = -INFINITY, max_q = -INFINITY;
    for (int64_t v = 0; v < vocab; ++v) max_p = std::max(max_p, double{zp[v]}), max_q = std::max(max_q, double{zq[v]});
    double sum_p = 0, sum_q = 0;
    for (int64_t v = 0; v < vocab; ++v) sum_p += std::exp(zp[v] - max_p), sum_q += std::exp(zq[v] - max_q);
    for (int64_t v = 0; v < vocab; ++v) {
      const double lp = zp[v] - max_p - std::log(sum_p), lq = zq[v] - max_q - std::log(sum_q);
      kl += std::exp(lp) * (lp - lq);
    }
    agree += std::max_element(zp, zp + vocab) - zp == std::max_element(zq, zq + vocab) - zq ? 1 : 0;
  }
  kl /= static_cast<double>(positions);
  std::fprintf(stderr, "NVFP4 merge vs BF16 merge: KL %.5f per position, top-1 agreement %.3f over %lld positions\n",
               kl, static_cast<double>(agree) / static_cast<double>(positions), static_cast<long long>(positions));
  EXPECT_TRUE(std::isfinite(kl));
  EXPECT_LT(kl, 1.0);
}

// `export --merge-lora --qat-steps N` (train/merge_qat.h): the merge written as an F32 start model (the merged values
// bit for bit), N steps of full-parameter QAT on the LoRA run's pairs, the end exported as NVFP4. The recovered
// export fits the pairs better than the NVFP4 re-quantization of the merge alone; the start model and the QAT run are
// kept, and a second call refuses to overwrite them; exports that hold no NVFP4 weights are refused.
TEST(TrainerLora, QatStepsAfterAMergeRecoverTheNvfp4Export) {
  test::TempDir dir;
  const fs::path base = nvfp4_base(dir, 30.0f);
  TrainOptions options = lora_run(dir, base);
  options.max_steps = 12;
  options.export_path.clear();
  Trainer(options, {}).run({});

  const CheckpointExportInput input = open_checkpoint_for_export(dir / "run");
  const MergedModel merged = merge_lora_adapters(*open_model(base), load_checkpoint_masters(input), input.run_options);
  const ExportOptions nvfp4;
  export_checkpoint(input, dir / "plain", nvfp4, std::span<const NamedTensor>(merged.masters));

  MergeQatOptions qat;
  qat.steps = 10;
  qat.lr = 2e-3;
  const MergeQatResult result = recover_merge_with_qat(input, merged.masters, dir / "recovered", nvfp4, qat);
  EXPECT_EQ(result.run_dir, dir / "run" / "merge-qat");
  EXPECT_EQ(result.start_model, dir / "run" / "merge-qat-start");
  EXPECT_EQ(result.summary.steps, 10);
  ASSERT_TRUE(result.summary.export_report.has_value());
  EXPECT_EQ(result.summary.export_report->out, dir / "recovered");
  EXPECT_EQ(test::read_jsonl(result.run_dir / "metrics.jsonl").size(), 10u);

  // The start model is the merge, in F32, bit for bit.
  const std::unique_ptr<ModelFiles> start = open_model(result.start_model);
  ASSERT_EQ(start->weights().size(), merged.masters.size());
  for (const NamedTensor& weight : merged.masters) {
    const ModelWeight stored = start->load(weight.name);
    ASSERT_FALSE(stored.is_nvfp4()) << weight.name;
    EXPECT_EQ(stored.dense.dtype(), DType::F32) << weight.name;
    EXPECT_TRUE(to_float_vector(stored.dense) == to_float_vector(weight.tensor)) << weight.name;
  }

  // Loss on the pairs the runs trained on: the recovered export below the plain NVFP4 merge.
  auto pairs_loss = [&](const fs::path& model_dir) {
    const Qwen3Model model = Qwen3Model::load(model_dir);
    EvalOptions eval;
    eval.data = options.data;
    eval.data_template = options.data_template;
    eval.chat_template = options.chat_template;
    return evaluate_model(model, Tokenizer::load(model_dir), nullptr, eval).loss;
  };
  const double plain = pairs_loss(dir / "plain"), recovered = pairs_loss(dir / "recovered");
  std::fprintf(stderr, "pairs loss: NVFP4 merge %.4f, after 10 QAT steps %.4f\n", plain, recovered);
  EXPECT_LT(recovered, plain);

  // Nothing is replaced; exports without NVFP4 weights have nothing to recover.
  EXPECT_THROW(recover_merge_with_qat(input, merged.masters, dir / "again", nvfp4, qat), Error);
  ExportOptions bf16;
  bf16.format = ModelFormat::HfSafetensors;
  qat.run_dir = dir / "other";
  EXPECT_THROW(recover_merge_with_qat(input, merged.masters, dir / "bf16", bf16, qat), Error);
  ExportOptions f16_dense;
  f16_dense.dense_dtype = DType::F16;
  EXPECT_THROW(recover_merge_with_qat(input, merged.masters, dir / "f16", f16_dense, qat), Error);
  EXPECT_FALSE(fs::exists(dir / "other"));
  EXPECT_FALSE(fs::exists(dir / "other-start"));
}

TEST(TrainerLora, SomeTargetsOnTheLastLayerAreLayersToTransform) {
  test::TempDir dir;
  TrainOptions options = lora_run(dir, test::tiny_model_dir());
  options.max_steps = 2;
  options.warmup = 1;
  options.lora_targets = "v,q";
  options.train_last_layers = 1;
  Trainer trainer(options, {});
  trainer.run({});
  const json config = json::parse(test::read_file(dir / "adapter" / kPeftConfigFileName));
  EXPECT_EQ(config.at("target_modules"), json({"q_proj", "v_proj"}));
  EXPECT_EQ(config.at("layers_to_transform"), json({1}));
  EXPECT_EQ(config.at("layers_pattern"), "layers");
  EXPECT_EQ(SafetensorsFile::open(dir / "adapter" / kPeftWeightsFileName)->entries().size(), 4u);
}

TEST(TrainerLora, FlagsThatCannotGoWithLoraAreRefused) {
  test::TempDir dir;
  const TrainOptions base = lora_run(dir, test::tiny_model_dir());
  auto refused = [&](const std::function<void(TrainOptions&)>& change, const std::string& needle) {
    TrainOptions options = base;
    change(options);
    try {
      validate_train_options(options);
      ADD_FAILURE() << "accepted; expected an error with: " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  refused([](TrainOptions& o) { o.bf16_master = true; }, "drop --master bf16");
  refused([](TrainOptions& o) { o.quantize_lm_head = true; }, "drop --quantize-lm-head");
  refused([](TrainOptions& o) { o.export_format = ModelFormat::HfSafetensors; }, "PEFT");
  refused([](TrainOptions& o) { o.lora_targets = "q,x"; }, "unknown linear 'x'");
  refused(
      [](TrainOptions& o) {
        o.lora_rank = 0;
        o.lora_alpha = 0;
        o.lora_targets = "q";
      },
      "add it");
  validate_train_options(base);
}

}  // namespace
}  // namespace nvfp4lm::test_trainer_lora
