// ModelOpt NVFP4 layout: one quantized weight written and read back, hf_quant_config.json parsing, and the
// errors for malformed quantized weights.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "core/json_text.h"
#include "io/io_test_util.h"
#include "io/modelopt.h"
#include "io/safetensors_reader.h"
#include "io/safetensors_writer.h"

namespace nvfp4lm::test::test_modelopt {
namespace {

using json = nlohmann::json;
const std::string kName = "model.layers.0.mlp.down_proj.weight";

Nvfp4Tensor sample_weight() {
  Rng rng(9);
  return quantize_nvfp4(random_normal({32, 48}, rng, 0.05f));
}

TEST(Modelopt, WeightRoundTrip) {
  TempDir dir;
  const Nvfp4Tensor q = sample_weight();
  std::vector<SafetensorsEntrySpec> specs;
  declare_modelopt_weight(specs, kName, 32, 48, /*with_input_scale=*/true);
  ASSERT_EQ(specs.size(), 4u);
  EXPECT_EQ(specs[0].name, kName);
  EXPECT_EQ(specs[1].name, "model.layers.0.mlp.down_proj.weight_scale");
  EXPECT_EQ(specs[2].name, "model.layers.0.mlp.down_proj.weight_scale_2");
  EXPECT_EQ(specs[3].name, "model.layers.0.mlp.down_proj.input_scale");
  uint64_t bytes = 0;
  for (const auto& spec : specs) bytes += SafetensorsWriter::entry_bytes(spec);
  EXPECT_EQ(bytes, modelopt_weight_bytes(32, 48, true));
  {
    SafetensorsWriter writer(dir / "m.safetensors", specs);
    write_modelopt_weight(writer, kName, q, 0.125f);
    writer.finish();
  }
  const SafetensorsSet set = SafetensorsSet::open_file(dir / "m.safetensors");
  EXPECT_TRUE(modelopt_is_quantized(set, kName));
  const Nvfp4Tensor back = read_modelopt_weight(set, kName);
  EXPECT_EQ(back.rows, 32);
  EXPECT_EQ(back.cols, 48);
  EXPECT_EQ(back.tensor_scale, q.tensor_scale);
  EXPECT_EQ(back.codes.dtype(), DType::E2M1x2);
  EXPECT_EQ(std::memcmp(back.codes.raw(), q.codes.raw(), q.codes.nbytes()), 0);
  float input_scale = 0;
  const auto input_scale_at = set.at(modelopt_names(kName).input_scale);
  std::memcpy(&input_scale, input_scale_at.file->bytes_of(*input_scale_at.entry), sizeof(float));
  EXPECT_EQ(input_scale, 0.125f);
  EXPECT_EQ(std::memcmp(back.block_scales.raw(), q.block_scales.raw(), q.block_scales.nbytes()), 0);
  EXPECT_EQ(modelopt_weight_file_bytes(set, kName), bytes);
}

// A weight-only (W4A16) weight has three tensors, no input_scale, and reads back the same.
TEST(Modelopt, WeightOnlyWeightHasNoInputScale) {
  TempDir dir;
  const Nvfp4Tensor q = sample_weight();
  std::vector<SafetensorsEntrySpec> specs;
  declare_modelopt_weight(specs, kName, 32, 48, /*with_input_scale=*/false);
  ASSERT_EQ(specs.size(), 3u);
  uint64_t bytes = 0;
  for (const auto& spec : specs) bytes += SafetensorsWriter::entry_bytes(spec);
  EXPECT_EQ(bytes, modelopt_weight_bytes(32, 48, false));
  {
    SafetensorsWriter writer(dir / "m.safetensors", specs);
    write_modelopt_weight(writer, kName, q, std::nullopt);
    writer.finish();
  }
  const SafetensorsSet set = SafetensorsSet::open_file(dir / "m.safetensors");
  EXPECT_FALSE(set.contains(modelopt_names(kName).input_scale));
  const Nvfp4Tensor back = read_modelopt_weight(set, kName);
  EXPECT_EQ(back.tensor_scale, q.tensor_scale);
  EXPECT_EQ(std::memcmp(back.codes.raw(), q.codes.raw(), q.codes.nbytes()), 0);
  EXPECT_EQ(modelopt_weight_file_bytes(set, kName), bytes);
  // A scale that is not a measured one is refused on the way in, never written.
  std::vector<SafetensorsEntrySpec> w4a4;
  declare_modelopt_weight(w4a4, kName, 32, 48, true);
  SafetensorsWriter writer(dir / "bad.safetensors", w4a4);
  expect_error([&] { write_modelopt_weight(writer, kName, q, 0.0f); }, {kName, "input_scale", "finite and positive"});
}

// Writes the four tensors with one of them altered.
fs::path write_variant(const TempDir& dir, const std::string& which, const SafetensorsEntrySpec& replacement,
                       const std::string& replacement_bytes) {
  const Nvfp4Tensor q = sample_weight();
  std::vector<SafetensorsEntrySpec> specs;
  declare_modelopt_weight(specs, kName, 32, 48, /*with_input_scale=*/true);
  const float one = 1.0f;
  std::vector<std::string> data = {std::string(static_cast<const char*>(q.codes.raw()), q.codes.nbytes()),
                                   std::string(static_cast<const char*>(q.block_scales.raw()), q.block_scales.nbytes()),
                                   std::string(reinterpret_cast<const char*>(&q.tensor_scale), 4),
                                   std::string(reinterpret_cast<const char*>(&one), 4)};
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].name != which) continue;
    specs[i] = replacement;
    data[i] = replacement_bytes;
  }
  const fs::path path = dir / "variant.safetensors";
  std::error_code ec;
  fs::remove(path, ec);
  SafetensorsWriter writer(path, specs);
  for (size_t i = 0; i < specs.size(); ++i) writer.write_bytes(specs[i].name, data[i].data(), data[i].size());
  writer.finish();
  return path;
}

TEST(Modelopt, MalformedWeightsAreErrors) {
  TempDir dir;
  const auto names = modelopt_names(kName);
  auto read_error = [&](const fs::path& path, std::initializer_list<std::string> parts) {
    const SafetensorsSet set = SafetensorsSet::open_file(path);
    expect_error([&] { read_modelopt_weight(set, kName); }, parts);
  };
  read_error(
      write_variant(dir, names.weight_scale, {names.weight_scale, DType::U8, Shape{32, 3}}, std::string(96, '\x38')),
      {"variant.safetensors", kName, "weight_scale must be F8_E4M3"});
  read_error(write_variant(dir, names.weight, {names.weight, DType::BF16, Shape{32, 12}}, std::string(768, '\0')),
             {kName, "must be U8"});
  read_error(
      write_variant(dir, names.weight_scale, {names.weight_scale, DType::E4M3, Shape{32, 2}}, std::string(64, '\x38')),
      {kName, "block scales"});
  const float negative = -1.0f, nan = NAN;
  read_error(write_variant(dir, names.weight_scale_2, {names.weight_scale_2, DType::F32, Shape{}},
                           std::string(reinterpret_cast<const char*>(&negative), 4)),
             {kName, "tensor scale"});
  read_error(write_variant(dir, names.input_scale, {names.input_scale, DType::F32, Shape{}},
                           std::string(reinterpret_cast<const char*>(&nan), 4)),
             {kName, "input_scale"});
  read_error(
      write_variant(dir, names.weight_scale_2, {names.weight_scale_2, DType::F32, Shape{2}}, std::string(8, '\0')),
      {"weight_scale_2", "F32 scalar"});
  read_error(write_variant(dir, names.weight_scale_2, {"unrelated", DType::F32, Shape{}}, std::string(4, '\0')),
             {kName, "weight_scale_2", "missing"});
  read_error(
      write_variant(dir, names.weight_scale, {names.weight_scale, DType::E4M3, Shape{32, 3}}, std::string(96, '\x7f')),
      {kName, "NaN"});
}

TEST(Modelopt, QuantConfigFiles) {
  TempDir dir;
  const fs::path path = dir / "hf_quant_config.json";
  // Uncalibrated: weight-only.
  EXPECT_EQ(modelopt_quant_algo(false), "W4A16_NVFP4");
  EXPECT_EQ(modelopt_quant_algo(true), "NVFP4");
  write_file(
      path,
      hf_quant_config_json({"lm_head"}, modelopt_quant_algo(false), modelopt_calibration_note(false, "", 0)).dump());
  const ModeloptQuantConfig weight_only = load_hf_quant_config(path);
  EXPECT_EQ(weight_only.quant_algo, "W4A16_NVFP4");
  EXPECT_FALSE(modelopt_input_scales_calibrated(dir.path()));
  // Engines read only "quantization": our note lives beside it, never inside.
  const nlohmann::json written = read_json_file(path);
  EXPECT_EQ(written["quantization"].size(), 4u);
  EXPECT_EQ(written["nvfp4lm"]["input_scale"], "none");
  // Calibrated: W4A4.
  write_file(path, hf_quant_config_json({"lm_head"}, modelopt_quant_algo(true),
                                        modelopt_calibration_note(true, "quantize --calibrate c.txt", 64))
                       .dump());
  EXPECT_TRUE(modelopt_input_scales_calibrated(dir.path()));
  EXPECT_EQ(read_json_file(path)["nvfp4lm"]["calibration"]["tokens"], 64);
  const ModeloptQuantConfig config = load_hf_quant_config(path);
  EXPECT_EQ(config.producer_name, "nvfp4lm");
  EXPECT_EQ(config.quant_algo, "NVFP4");
  EXPECT_EQ(config.group_size, 16);
  EXPECT_FALSE(config.kv_cache_quant_algo.has_value());
  EXPECT_EQ(config.exclude_modules, (std::vector<std::string>{"lm_head"}));

  // What NVIDIA publishes for its NVFP4 checkpoints.
  write_file(path, R"({"producer": {"name": "modelopt", "version": "0.29.0"},
      "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16,
                       "exclude_modules": ["lm_head"]}})");
  EXPECT_EQ(load_hf_quant_config(path).kv_cache_quant_algo, "FP8");
  write_file(path, R"({"quantization": {"quant_algo": "FP8"}})");
  expect_error([&] { load_hf_quant_config(path); }, {path.string(), "FP8", "only NVFP4 and W4A16_NVFP4"});
  write_file(path, R"({"quantization": {"quant_algo": "NVFP4", "group_size": 32}})");
  expect_error([&] { load_hf_quant_config(path); }, {"group_size 32"});
  write_file(path, R"({"producer": {}})");
  expect_error([&] { load_hf_quant_config(path); }, {"'quantization'"});

  // config.json's block: 4-bit activations only in the W4A4 form (ModelOpt's convert_hf_quant_config_format).
  const json w4a4 = modelopt_quantization_config({"lm_head"}, modelopt_quant_algo(true));
  EXPECT_EQ(w4a4["quant_method"], "modelopt");
  EXPECT_EQ(w4a4["quant_algo"], "NVFP4");
  EXPECT_EQ(w4a4["config_groups"]["group_0"]["input_activations"]["num_bits"], 4);
  EXPECT_EQ(w4a4["config_groups"]["group_0"]["targets"], json({"Linear"}));
  const json w4a16 = modelopt_quantization_config({"lm_head"}, modelopt_quant_algo(false));
  EXPECT_EQ(w4a16["quant_algo"], "W4A16_NVFP4");
  EXPECT_TRUE(w4a16["config_groups"]["group_0"]["input_activations"].is_null());
  EXPECT_EQ(w4a16["config_groups"]["group_0"]["weights"]["num_bits"], 4);
}

}  // namespace
}  // namespace nvfp4lm::test::test_modelopt
