// Activation calibration (train/calibrate.h, io/activation_calibration.h) and the ModelOpt input_scale it gives:
//  - `quantize --calibrate`: every quantized linear's input_scale is amax / (6 * 448) of its input activations over
//    the calibration text, recomputed here by a forward written out with the CPU ops (and layer 0's q/k/v input by
//    plain loops: embedding row, RMSNorm); q/k/v and gate/up share one; hf_quant_config.json says "calibrated";
//  - without calibration the export is weight-only (W4A16_NVFP4, no input_scale, "none"), also when a
//    calibrated checkpoint's export is redone without --calibrate;
//  - `export --calibrate` measures the exported (quantized) forward; `train --calibrate-steps N` records during the
//    last N steps, saves the ranges in its checkpoints and writes them at --export; resume keeps them bit for bit;
//  - the calibration's JSON round-trips exactly and rejects bad values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/test_util.h"
#include "core/json_text.h"
#include "io/model_files.h"
#include "io/modelopt.h"
#include "io/quantize_model.h"
#include "io/safetensors_reader.h"
#include "io/weight_names.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/gemm.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"
#include "ops/swiglu.h"
#include "train/calibrate.h"
#include "train/trainer.h"
#include "train/trainer_test_support.h"

namespace nvfp4lm::test_calibration {
namespace {

using test::TempDir;

constexpr const char* kCalibrationText =
    "A short text to calibrate with: the cat sat on the mat, and the dog barked twice.";

float input_scale_in(const fs::path& model_dir, const std::string& weight_name) {
  const SafetensorsSet set = SafetensorsSet::open_dir(model_dir);
  const auto location = set.at(modelopt_names(weight_name).input_scale);
  float value;
  std::memcpy(&value, location.file->bytes_of(*location.entry), sizeof(float));
  return value;
}

bool has_input_scale(const fs::path& model_dir, const std::string& weight_name) {
  return SafetensorsSet::open_dir(model_dir).contains(modelopt_names(weight_name).input_scale);
}

std::string calibration_note(const fs::path& model_dir) {
  return read_json_file(model_dir / "hf_quant_config.json")["nvfp4lm"]["input_scale"].get<std::string>();
}

Tensor weight(const ModelFiles& files, const std::string& name) { return files.load(name).dense; }

float amax_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  float amax = 0;
  for (int64_t i = 0; i < c.numel(); ++i) amax = std::max(amax, std::fabs(c.data<float>()[i]));
  return amax;
}

// The amax of every projection's input over `ids` (one sequence), from a forward written out here with the CPU ops.
std::map<std::string, float> recomputed_input_amax(const ModelFiles& files, const std::vector<int32_t>& ids) {
  const Qwen3Config& c = files.config();
  const int64_t n = static_cast<int64_t>(ids.size()), h = c.hidden_size;
  const auto eps = static_cast<float>(c.rms_norm_eps);
  const Tensor id_tensor = Tensor::from_ints(ids, Shape{1, n});
  std::vector<int32_t> position_values(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) position_values[i] = static_cast<int32_t>(i);
  const Tensor positions = Tensor::from_ints(position_values, Shape{1, n});
  const RopeTable rope(c.head_dim, static_cast<float>(c.rope_theta), n);
  std::map<std::string, float> amax;
  Tensor x = Tensor::empty({1, n, h}, DType::F32);
  embedding_forward(id_tensor, weight(files, "model.embed_tokens.weight"), x);
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    const std::string p = fmt::format("model.layers.{}.", layer);
    Tensor normed = Tensor::empty({1, n, h}, DType::F32);
    rmsnorm_forward(x, weight(files, p + "input_layernorm.weight"), eps, normed);
    for (const char* name : {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"})
      amax[p + name] = amax_of(normed);
    const Tensor rows = normed.reshape({n, h});
    Tensor q = Tensor::empty({1, n, c.num_attention_heads, c.head_dim}, DType::F32);
    Tensor k = Tensor::empty({1, n, c.num_key_value_heads, c.head_dim}, DType::F32);
    Tensor v = Tensor::empty({1, n, c.num_key_value_heads, c.head_dim}, DType::F32);
    Tensor q_rows = q.reshape({n, c.q_dim()}), k_rows = k.reshape({n, c.kv_dim()}), v_rows = v.reshape({n, c.kv_dim()});
    linear_forward(rows, weight(files, p + "self_attn.q_proj.weight"), q_rows);
    linear_forward(rows, weight(files, p + "self_attn.k_proj.weight"), k_rows);
    linear_forward(rows, weight(files, p + "self_attn.v_proj.weight"), v_rows);
    rmsnorm_forward(q, weight(files, p + "self_attn.q_norm.weight"), eps, q);
    rmsnorm_forward(k, weight(files, p + "self_attn.k_norm.weight"), eps, k);
    rope_forward(q, positions, rope);
    rope_forward(k, positions, rope);
    Tensor attn = Tensor::empty(q.shape(), DType::F32);
    AttentionOptions options;
    options.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    attention_forward(q, k, v, attn, options);
    amax[p + "self_attn.o_proj.weight"] = amax_of(attn);
    Tensor proj = Tensor::empty({n, h}, DType::F32);
    linear_forward(attn.reshape({n, c.q_dim()}), weight(files, p + "self_attn.o_proj.weight"), proj);
    add_inplace(x, proj.reshape({1, n, h}));
    rmsnorm_forward(x, weight(files, p + "post_attention_layernorm.weight"), eps, normed);
    amax[p + "mlp.gate_proj.weight"] = amax[p + "mlp.up_proj.weight"] = amax_of(normed);
    Tensor gate = Tensor::empty({n, c.intermediate_size}, DType::F32), up = gate.clone(), act = gate.clone();
    linear_forward(normed.reshape({n, h}), weight(files, p + "mlp.gate_proj.weight"), gate);
    linear_forward(normed.reshape({n, h}), weight(files, p + "mlp.up_proj.weight"), up);
    swiglu_forward(gate, up, act);
    amax[p + "mlp.down_proj.weight"] = amax_of(act);
    linear_forward(act, weight(files, p + "mlp.down_proj.weight"), proj);
    add_inplace(x, proj.reshape({1, n, h}));
  }
  return amax;
}

// Layer 0's q/k/v input amax by hand: RMSNorm of each token's embedding row.
float layer0_qkv_amax(const ModelFiles& files, const std::vector<int32_t>& ids) {
  const Qwen3Config& c = files.config();
  const Tensor embed = weight(files, "model.embed_tokens.weight");
  const Tensor norm = weight(files, "model.layers.0.input_layernorm.weight");
  float amax = 0;
  for (int32_t id : ids) {
    const float* row = embed.data<float>() + static_cast<int64_t>(id) * c.hidden_size;
    double squares = 0;
    for (int64_t i = 0; i < c.hidden_size; ++i) squares += static_cast<double>(row[i]) * row[i];
    const double rstd = 1.0 / std::sqrt(squares / static_cast<double>(c.hidden_size) + c.rms_norm_eps);
    for (int64_t i = 0; i < c.hidden_size; ++i)
      amax = std::max(amax, static_cast<float>(std::fabs(row[i] * rstd * norm.data<float>()[i])));
  }
  return amax;
}

CalibrationOptions calibration_options(const fs::path& data) {
  CalibrationOptions options;
  options.data = data;
  options.seq_len = 64;
  return options;
}

TEST(Calibration, QuantizeWritesAmaxOver6x448OfTheRecomputedActivations) {
  TempDir dir;
  test::write_file(dir / "calib.txt", kCalibrationText);
  const std::unique_ptr<ModelFiles> source = open_model(test::tiny_model_dir());
  const Tokenizer tokenizer = Tokenizer::load(test::tiny_tokenizer_dir());
  std::vector<int32_t> ids = tokenizer.encode(kCalibrationText);
  ids.push_back(tokenizer.special_ids().endoftext);
  ASSERT_LT(ids.size(), 64u);

  QuantizeOptions options;
  options.calibration = calibrate_source_model(*source, tokenizer, calibration_options(dir / "calib.txt"));
  EXPECT_EQ(options.calibration->tokens, static_cast<int64_t>(ids.size()));
  quantize_model(*source, dir / "calibrated", options);
  EXPECT_EQ(calibration_note(dir / "calibrated"), "calibrated");

  const std::map<std::string, float> expected = recomputed_input_amax(*source, ids);
  EXPECT_FLOAT_EQ(expected.at("model.layers.0.self_attn.q_proj.weight"), layer0_qkv_amax(*source, ids));
  int checked = 0;
  for (const ExpectedWeight& w : qwen3_expected_weights(source->config())) {
    if (!is_nvfp4_projection(w.kind)) continue;
    const float scale = input_scale_in(dir / "calibrated", w.name);
    EXPECT_FLOAT_EQ(scale, expected.at(w.name) / (6.0f * 448.0f)) << w.name;
    EXPECT_NE(scale, 1.0f) << w.name;
    // Fused groups share one scale.
    const std::string group = fused_scale_group(w.name);
    if (group.ends_with("qkv")) {
      EXPECT_EQ(scale, input_scale_in(dir / "calibrated", group.substr(0, group.size() - 3) + "q_proj.weight"));
    }
    if (group.ends_with("gate_up")) {
      EXPECT_EQ(scale, input_scale_in(dir / "calibrated", group.substr(0, group.size() - 7) + "gate_proj.weight"));
    }
    ++checked;
  }
  EXPECT_EQ(checked, 14);

  // Without calibration: weight-only, no scale at all, said so.
  quantize_model(*source, dir / "plain", QuantizeOptions{});
  EXPECT_EQ(calibration_note(dir / "plain"), "none");
  EXPECT_FALSE(has_input_scale(dir / "plain", "model.layers.1.mlp.down_proj.weight"));
  EXPECT_TRUE(has_input_scale(dir / "calibrated", "model.layers.1.mlp.down_proj.weight"));
  // The calibrated model still loads and reads as NVFP4.
  EXPECT_TRUE(open_model(dir / "calibrated")->at("model.layers.0.self_attn.q_proj.weight").nvfp4);

  QuantizeOptions dat;
  dat.format = ModelFormat::Dat;
  dat.calibration = options.calibration;
  test::expect_error([&] { quantize_model(*source, dir / "dat", dat); }, {"--calibrate", "dat"});
}

TEST(Calibration, TrainRecordsTheLastStepsExportsThemAndResumesThemBitForBit) {
  TempDir dir;
  const fs::path data = test::write_pairs_jsonl(dir / "pairs.jsonl", 12);
  TrainOptions options = test::tiny_train_options(data, dir / "run");
  options.calibrate_steps = 2;
  options.save_every = 3;
  options.export_path = (dir / "export").string();
  ActivationCalibration uninterrupted;
  {
    Trainer trainer(options, {});
    for (int i = 0; i < 3; ++i) trainer.train_step();
    EXPECT_TRUE(trainer.calibration().empty()) << "steps 1-3 of 6 are not among the last 2";
    trainer.run();
    uninterrupted = trainer.calibration();
  }
  ASSERT_FALSE(uninterrupted.empty());
  EXPECT_EQ(calibration_note(dir / "export"), "calibrated");
  for (const char* name : {"model.layers.0.self_attn.k_proj.weight", "model.layers.1.mlp.up_proj.weight",
                           "model.layers.1.self_attn.o_proj.weight"})
    EXPECT_EQ(input_scale_in(dir / "export", name), uninterrupted.input_scale(name)) << name;

  // The checkpoint carries the ranges: `nvfp4lm export` of it writes them without --calibrate.
  const CheckpointExportInput input = open_checkpoint_for_export(dir / "run");
  ASSERT_TRUE(input.recorded_calibration);
  EXPECT_EQ(input.recorded_calibration->input_amax, uninterrupted.input_amax);

  // Stopped after step 5 (inside the recording) and resumed: the same ranges.
  TrainOptions split = options;
  split.output = (dir / "run2").string();
  split.export_path = (dir / "export2").string();
  {
    Trainer trainer(split, {});
    for (int i = 0; i < 5; ++i) trainer.train_step();
    trainer.save_checkpoint();
  }
  split.resume = true;
  Trainer resumed(split, {});
  resumed.run();
  EXPECT_EQ(resumed.calibration().input_amax, uninterrupted.input_amax);
  EXPECT_EQ(resumed.calibration().tokens, uninterrupted.tokens);
}

TEST(Calibration, ExportCalibratesTheExportedForwardAndAReexportWithoutItIsWeightOnly) {
  TempDir dir;
  const fs::path data = test::write_pairs_jsonl(dir / "pairs.jsonl", 8);
  test::write_file(dir / "calib.txt", kCalibrationText);
  TrainOptions options = test::tiny_train_options(data, dir / "run");
  options.max_steps = 2;
  Trainer(options, {}).run();

  // The run's source-model/ copy holds the tokenizer the calibration text is read with.
  const CheckpointExportInput input = open_checkpoint_for_export(dir / "run");
  ExportOptions export_options;
  export_options.calibration = calibrate_checkpoint(input, export_options, calibration_options(dir / "calib.txt"));
  export_checkpoint(input, dir / "calibrated", export_options);
  EXPECT_EQ(calibration_note(dir / "calibrated"), "calibrated");
  const std::string q = "model.layers.1.self_attn.q_proj.weight", v = "model.layers.1.self_attn.v_proj.weight";
  EXPECT_EQ(input_scale_in(dir / "calibrated", q), input_scale_in(dir / "calibrated", v));
  EXPECT_NE(input_scale_in(dir / "calibrated", q), 1.0f);

  export_checkpoint(input, dir / "again", ExportOptions{});
  EXPECT_EQ(calibration_note(dir / "again"), "none");
  EXPECT_FALSE(has_input_scale(dir / "again", q));

  ExportOptions dat;
  dat.format = ModelFormat::Dat;
  test::expect_error([&] { calibrate_checkpoint(input, dat, calibration_options(dir / "calib.txt")); },
                     {"--calibrate", "--format dat"});
}

TEST(Calibration, JsonRoundTripsExactlyAndRejectsBadValues) {
  ActivationCalibration calibration;
  calibration.source = "test";
  calibration.tokens = 12;
  calibration.observe("model.layers.0.self_attn.q_proj.weight", 3.1415927f);
  calibration.observe("model.layers.0.self_attn.q_proj.weight", 1.0f);  // the max stays
  calibration.observe("model.layers.0.self_attn.k_proj.weight", 7.25f);
  const ActivationCalibration back =
      ActivationCalibration::from_json(nlohmann::json::parse(calibration.to_json().dump()), "state");
  EXPECT_EQ(back.input_amax, calibration.input_amax);
  EXPECT_EQ(back.tokens, 12);
  // q/k/v share the group's max.
  EXPECT_EQ(back.input_scale("model.layers.0.self_attn.v_proj.weight"), 7.25f / (6.0f * 448.0f));
  test::expect_error([&] { back.input_scale("model.layers.0.mlp.down_proj.weight"); }, {"no input range", "down_proj"});
  nlohmann::json bad = calibration.to_json();
  bad["input_amax"]["model.layers.0.self_attn.q_proj.weight"] = -1;
  test::expect_error([&] { ActivationCalibration::from_json(bad, "state"); }, {"state", "q_proj", ">= 0"});
}

}  // namespace
}  // namespace nvfp4lm::test_calibration
