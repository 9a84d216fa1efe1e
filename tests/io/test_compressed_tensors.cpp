// compressed-tensors NVFP4 (io/compressed_tensors.h) against statements of the layout taken from the projects that
// define and load it, not from nvfp4lm's writer (file:line at the commits named):
//  - compressed-tensors 0.18.0 (github.com/vllm-project/compressed-tensors, ac8e2ba8), under src/compressed_tensors/:
//      compressors/nvfp4/base.py:60-93 NVFP4PackedCompressor.compress: quantize(weight, scale, global_scale) (:81),
//                                      weight_packed = pack_fp4_to_uint8 (:88), weight_scale through _compress_scale,
//                                      cast to scale_dtype, float8_e4m3fn by default (:52-53, :89)
//      compressors/nvfp4/helpers.py:109 pack_fp4_to_uint8 (CPU fallback): sign = signbit(x) (:134), index of |x| in
//                                      {0, .5, 1, 1.5, 2, 3, 4, 6} via (x * 2).to(int8) (:137), low nibble first
//      quantization/lifecycle/forward_helpers.py:525 _quantize: scale = scale / global_scale (:536); scaled = x /
//                                      scale (:538); round_to_quantized_type_args (:541): clamp to [-6, 6], cast_to_fp4
//      quantization/utils/fp4_utils.py:78 cast_to_fp4: ties to even at 0.25 0.75 1.25 1.75 2.5 3.5 5 (:90-97), sign
//                                      kept
//      quantization/quant_scheme.py:166 NVFP4A16 and :180 NVFP4 presets (4-bit float, tensor_group, group 16,
//                                      symmetric, scale_dtype float8_e4m3fn); quant_args.py defaults and serializers
//      compressors/model_compressors/model_compressor.py:209 update_config: version, quant_method, sparsity_config,
//                                      transform_config beside QuantizationConfig.model_dump() (:236-242)
//      entrypoints/convert/converters/modelopt_nvfp4.py:44-46 ModelOpt -> compressed-tensors: weight -> weight_packed,
//                                      weight_global_scale = 1 / weight_scale_2, input_global_scale = 1 / input_scale
//                                      (:55-60)
//  - vLLM (vllm/model_executor/layers/quantization/compressed_tensors/):
//      schemes/compressed_tensors_w4a4_nvfp4.py (85f1f91) create_weights :75: weight_packed U8 [out, in/2] (:90-100),
//                                      weight_global_scale F32, one per fused partition (:103-107), weight_scale
//                                      float8_e4m3fn [out, in/16] (:110-121), input_global_scale F32 (:123-127);
//                                      process_weights_after_loading :129: the max over the partitions (:130, :133-135)
//      schemes/compressed_tensors_w4a16_nvfp4.py (17b6501) create_weights :33, the same without input_global_scale
//                                      (:48-79); process_weights_after_loading :81: 1 / max over partitions (:88-90)
//      compressed_tensors.py (be69645) _is_fp4a4_nvfp4 :298-323: weight and input both 4 bits (:315), float
//                                      (:311-314), tensor_group (:302-305), group 16 (:308-310), symmetric (:306);
//                                      _is_fp4a16_nvfp4 :326-344: the same for the weight (:328-335) with
//                                      input_activations null (:327); _get_scheme_from_parts :532 picks
//                                      CompressedTensorsW4A16Fp4 first (:542-543), then W4A4Fp4 for an activation
//                                      format (:577-581; W4A16Fp4 with the input scale where CUTLASS FP4 is missing,
//                                      :587)
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "io/compressed_tensors.h"
#include "io/io_test_util.h"
#include "io/model_copy.h"
#include "io/modelopt.h"
#include "io/quantize_model.h"
#include "io/safetensors_reader.h"
#include "io/safetensors_writer.h"
#include "io/weight_names.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"

namespace nvfp4lm::test::test_compressed_tensors {
namespace {

using json = nlohmann::json;

float scalar_of(const SafetensorsSet& set, const std::string& name) {
  const auto at = set.at(name);
  float value;
  std::memcpy(&value, at.file->bytes_of(*at.entry), sizeof(float));
  return value;
}

// cast_to_fp4 (fp4_utils.py, the CPU implementation) on one float32, then pack_fp4_to_uint8's index with the sign bit.
uint8_t compressed_tensors_code(float scaled) {
  const bool negative = std::signbit(scaled);         // torch.signbit: -0.0 too
  float x = std::min(std::max(scaled, -6.0f), 6.0f);  // round_to_quantized_type_args: clamp first
  x = std::fabs(x);
  float rounded;
  if (x <= 0.25f)
    rounded = 0.0f;
  else if (x < 0.75f)
    rounded = 0.5f;
  else if (x <= 1.25f)
    rounded = 1.0f;
  else if (x < 1.75f)
    rounded = 1.5f;
  else if (x <= 2.5f)
    rounded = 2.0f;
  else if (x < 3.5f)
    rounded = 3.0f;
  else if (x <= 5.0f)
    rounded = 4.0f;
  else
    rounded = 6.0f;
  // pack_fp4_to_uint8: (x * 2).to(int8).abs_() then 1,2,3,4,6,8,>=12 -> indices 1..7.
  const int doubled = static_cast<int>(rounded * 2);
  const uint8_t index = doubled == 0   ? 0
                        : doubled <= 4 ? static_cast<uint8_t>(doubled)
                        : doubled == 6 ? 5
                        : doubled == 8 ? 6
                                       : 7;
  return static_cast<uint8_t>(index | (negative ? 8 : 0));
}

// NVFP4PackedCompressor.compress of one [rows, cols] weight given its block scales (E4M3 bytes) and global scale:
// the packed bytes, computed as the torch code computes them in float32.
std::vector<uint8_t> compressor_bytes(const Tensor& weight, const uint8_t* scale_bytes, float global_scale) {
  const int64_t rows = weight.dim(0), cols = weight.dim(1);
  const float* w = weight.data<float>();
  std::vector<uint8_t> packed(static_cast<size_t>(rows * cols / 2));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; c += 2) {
      uint8_t codes[2];
      for (int k = 0; k < 2; ++k) {
        const float scale = e4m3_to_float(scale_bytes[r * (cols / 16) + (c + k) / 16]) / global_scale;
        codes[k] = compressed_tensors_code(w[r * cols + c + k] / scale);
      }
      packed[static_cast<size_t>((r * cols + c) / 2)] = static_cast<uint8_t>(codes[0] | (codes[1] << 4));
    }
  return packed;
}

// The quantization_config compressed-tensors writes for the NVFP4A16 preset (w4a4 false) or NVFP4 (true), written out
// here from quant_scheme.py, quant_args.py and model_compressor.py rather than from nvfp4lm's code; it is what vLLM's
// _is_fp4a4_nvfp4 / _is_fp4a16_nvfp4 accept (the header's lines).
json expected_config(bool w4a4) {
  const json weights = json::parse(R"({"num_bits": 4, "type": "float", "symmetric": true, "group_size": 16,
      "strategy": "tensor_group", "block_structure": null, "dynamic": false, "actorder": null,
      "scale_dtype": "torch.float8_e4m3fn", "zp_dtype": null, "observer": "memoryless_minmax", "observer_kwargs": {}})");
  const json inputs = json::parse(R"({"num_bits": 4, "type": "float", "symmetric": true, "group_size": 16,
      "strategy": "tensor_group", "block_structure": null, "dynamic": "local", "actorder": null,
      "scale_dtype": "torch.float8_e4m3fn", "zp_dtype": null, "observer": "static_minmax", "observer_kwargs": {}})");
  json config = json::parse(R"({"version": "0.18.0", "quant_method": "compressed-tensors", "sparsity_config": {},
      "transform_config": {}, "kv_cache_scheme": null, "format": "nvfp4-pack-quantized",
      "quantization_status": "compressed", "global_compression_ratio": null, "ignore": ["lm_head"],
      "config_groups": {"group_0": {"targets": ["Linear"], "output_activations": null,
                                    "format": "nvfp4-pack-quantized"}}})");
  config["config_groups"]["group_0"]["weights"] = weights;
  config["config_groups"]["group_0"]["input_activations"] = w4a4 ? inputs : json(nullptr);
  return config;
}

ActivationCalibration fixed_calibration(const ModelFiles& source, float amax) {
  ActivationCalibration calibration;
  calibration.source = "test: fixed amax";
  calibration.tokens = 1;
  for (const ExpectedWeight& weight : qwen3_expected_weights(source.config()))
    if (is_nvfp4_projection(weight.kind)) calibration.observe(weight.name, amax);
  return calibration;
}

// quantize_model into both formats from one dense model; returns {modelopt, compressed-tensors} paths.
std::pair<fs::path, fs::path> quantize_both(const TempDir& dir, bool calibrated) {
  const auto source = open_model(synth_small(dir, "dense", /*tied=*/false));
  QuantizeOptions options;
  if (calibrated) options.calibration = fixed_calibration(*source, 3.0f);
  quantize_model(*source, dir / "modelopt", options);
  options.format = ModelFormat::CompressedTensorsNvfp4;
  quantize_model(*source, dir / "ct", options);
  return {dir / "modelopt", dir / "ct"};
}

TEST(CompressedTensors, FilesAreWhatTheCompressorWritesForTheSameWeights) {
  for (const bool calibrated : {false, true}) {
    SCOPED_TRACE(calibrated ? "W4A4 (NVFP4)" : "W4A16 (NVFP4A16)");
    TempDir dir;
    const auto [modelopt_dir, ct_dir] = quantize_both(dir, calibrated);
    const auto modelopt = open_model(modelopt_dir);
    const auto ct = open_model(ct_dir);
    EXPECT_EQ(ct->format(), ModelFormat::CompressedTensorsNvfp4);
    EXPECT_FALSE(fs::exists(ct_dir / "hf_quant_config.json"));
    const json config = read_json_file(ct_dir / "config.json");
    EXPECT_EQ(config.at("quantization_config"), expected_config(calibrated));

    const SafetensorsSet set = SafetensorsSet::open_dir(ct_dir);
    const SafetensorsSet modelopt_set = SafetensorsSet::open_dir(modelopt_dir);
    int quantized = 0, exact = 0;
    for (const WeightInfo& info : modelopt->weights()) {
      if (!info.nvfp4) {
        EXPECT_TRUE(set.contains(info.name)) << info.name;
        continue;
      }
      ++quantized;
      const std::string prefix = info.name.substr(0, info.name.size() - std::string(".weight").size());
      EXPECT_FALSE(set.contains(info.name)) << "no '<prefix>.weight' beside weight_packed: " << info.name;
      const auto packed = set.at(prefix + ".weight_packed");
      const auto scale = set.at(prefix + ".weight_scale");
      const auto global = set.at(prefix + ".weight_global_scale");
      EXPECT_EQ(packed.entry->dtype, DType::U8);
      EXPECT_EQ(packed.entry->shape, (Shape{info.shape[0], info.shape[1] / 2}));
      EXPECT_EQ(scale.entry->dtype, DType::E4M3);
      EXPECT_EQ(scale.entry->shape, (Shape{info.shape[0], info.shape[1] / 16}));
      EXPECT_EQ(global.entry->dtype, DType::F32);
      EXPECT_EQ(global.entry->shape, (Shape{1}));  // generate_gparam(...).reshape([1]); vLLM loads one per partition
      EXPECT_EQ(set.contains(prefix + ".input_global_scale"), calibrated) << info.name;
      if (calibrated) {
        EXPECT_EQ(set.at(prefix + ".input_global_scale").entry->shape, (Shape{1}));
        // input_global_scale = 1 / input_scale (modelopt_nvfp4.py), read back by vLLM as 1 / it.
        const float input_scale = scalar_of(modelopt_set, prefix + ".input_scale");
        EXPECT_NEAR(scalar_of(set, prefix + ".input_global_scale") * input_scale, 1.0f, 1e-6f) << info.name;
        EXPECT_EQ(1.0f / scalar_of(set, prefix + ".input_global_scale"), input_scale) << info.name;
      }

      // The compressor's bytes for the same weights: the ModelOpt export's values, block scales and 1 / tensor scale.
      const ModelWeight reference = modelopt->load(info.name);
      const float global_scale = scalar_of(set, prefix + ".weight_global_scale");
      EXPECT_NEAR(global_scale * reference.nvfp4.tensor_scale, 1.0f, 1e-6f) << info.name;
      exact += 1.0f / global_scale == reference.nvfp4.tensor_scale ? 1 : 0;
      const Tensor values = dequantize_nvfp4(reference.nvfp4, DType::F32);
      const auto* scale_bytes = static_cast<const uint8_t*>(scale.file->bytes_of(*scale.entry));
      EXPECT_EQ(std::memcmp(scale_bytes, reference.nvfp4.block_scales.raw(), scale.entry->bytes), 0) << info.name;
      const std::vector<uint8_t> expected = compressor_bytes(values, scale_bytes, global_scale);
      ASSERT_EQ(expected.size(), packed.entry->bytes);
      EXPECT_EQ(std::memcmp(expected.data(), packed.file->bytes_of(*packed.entry), expected.size()), 0) << info.name;
    }
    EXPECT_EQ(quantized, 7 * small_test_config(false).num_hidden_layers);
    // nvfp4lm's tensor scales are all some float's reciprocal (quant/nvfp4_block.h), and the writer finds that float.
    EXPECT_EQ(exact, quantized);
  }
}

TEST(CompressedTensors, GlobalScaleIsTheReciprocalThatReadsBack) {
  // A bfloat16 global scale (what llm-compressor's observers make: 448 * 6 / amax in the weight's dtype,
  // helpers.py generate_gparam) is kept as it is.
  for (const float bf16_global : {2688.0f, 1.5e4f, 3.1875e5f, 96.5f}) {
    const float tensor_scale = 1.0f / bf16_global;
    EXPECT_EQ(compressed_tensors_global_scale(tensor_scale), bf16_global);
  }
  // Any tensor scale: the stored float reads back as the same scale whenever such a float exists.
  Rng rng(3);
  int exact = 0, tried = 0;
  for (int i = 0; i < 20000; ++i) {
    // Every mantissa equally likely, exponents of 2^-12 .. 2^-5 (tensor scales of weights with amax 0.01 .. 100).
    const uint32_t bits =
        static_cast<uint32_t>(115 + rng.below(8)) << 23 | static_cast<uint32_t>(rng.next_u64() & 0x7FFFFF);
    const float tensor_scale = std::bit_cast<float>(bits);
    const float g = compressed_tensors_global_scale(tensor_scale);
    ++tried;
    if (1.0f / g == tensor_scale) {
      ++exact;
      continue;
    }
    // None exists: the neighbours of the nearest reciprocal all miss, and the nearest is written.
    const float nearest = 1.0f / tensor_scale;
    EXPECT_EQ(g, nearest);
    float candidate = std::nextafter(std::nextafter(nearest, 0.0f), 0.0f);
    for (int k = 0; k < 5; ++k, candidate = std::nextafter(candidate, INFINITY))
      EXPECT_NE(1.0f / candidate, tensor_scale);
  }
  EXPECT_GT(exact, tried * 8 / 10);
  EXPECT_LT(exact, tried);  // some tensor scales are no float's reciprocal (why the writer logs them)
}

// A checkpoint laid out by compressed-tensors' own ModelOpt converter (modelopt_nvfp4.py process + create_config),
// built here with the safetensors writer from a ModelOpt export, reads as the same weights.
TEST(CompressedTensors, ConverterLayoutReadsAsTheModeloptWeights) {
  for (const bool calibrated : {false, true}) {
    SCOPED_TRACE(calibrated ? "W4A4" : "W4A16");
    TempDir dir;
    const auto [modelopt_dir, unused] = quantize_both(dir, calibrated);
    const SafetensorsSet source = SafetensorsSet::open_dir(modelopt_dir);
    std::vector<SafetensorsEntrySpec> specs;
    std::vector<std::pair<std::string, std::string>> renamed;  // converted name <- ModelOpt name
    for (const std::string& name : source.names()) {
      const auto at = source.at(name);
      std::string out = name;
      if (name.ends_with(".weight") && source.contains(name + "_scale")) out = name + "_packed";
      if (name.ends_with(".weight_scale_2")) out = name.substr(0, name.size() - 15) + ".weight_global_scale";
      if (name.ends_with(".input_scale")) out = name.substr(0, name.size() - 12) + ".input_global_scale";
      specs.push_back({out, at.entry->dtype, at.entry->shape});
      renamed.emplace_back(out, name);
    }
    fs::create_directories(dir / "converted");
    {
      SafetensorsWriter writer(dir / "converted" / "model.safetensors", specs);
      for (const auto& [out, name] : renamed) {
        const auto at = source.at(name);
        if (out.ends_with("global_scale")) {
          const float inverse = 1.0f / scalar_of(source, name);  // torch: 1 / tensor, in float32
          writer.write_bytes(out, &inverse, sizeof(float));
        } else {
          writer.write_bytes(out, at.file->bytes_of(*at.entry), at.entry->bytes);
        }
      }
      writer.finish();
    }
    json config = read_json_file(modelopt_dir / "config.json");
    config["quantization_config"] = expected_config(calibrated);  // create_config: the NVFP4 scheme, ignore lm_head
    write_file(dir / "converted" / "config.json", config.dump(2));

    const auto modelopt = open_model(modelopt_dir);
    const auto converted = open_model(dir / "converted");
    EXPECT_EQ(converted->format(), ModelFormat::CompressedTensorsNvfp4);
    ASSERT_EQ(converted->weights().size(), modelopt->weights().size());
    for (const WeightInfo& info : modelopt->weights()) {
      const WeightInfo& other = converted->at(info.name);
      EXPECT_EQ(other.nvfp4, info.nvfp4) << info.name;
      EXPECT_EQ(other.shape, info.shape) << info.name;
      const ModelWeight a = modelopt->load(info.name), b = converted->load(info.name);
      if (!info.nvfp4) {
        EXPECT_TRUE(same_bytes(a.dense, b.dense)) << info.name;
        continue;
      }
      EXPECT_TRUE(same_bytes(a.nvfp4.codes, b.nvfp4.codes)) << info.name;
      EXPECT_TRUE(same_bytes(a.nvfp4.block_scales, b.nvfp4.block_scales)) << info.name;
      // vLLM's reading: 1.0 / weight_global_scale in float32; nvfp4lm's scales survive the converter's 1 / x and it.
      EXPECT_EQ(b.nvfp4.tensor_scale, 1.0f / (1.0f / a.nvfp4.tensor_scale)) << info.name;
      EXPECT_EQ(b.nvfp4.tensor_scale, a.nvfp4.tensor_scale) << info.name;
      EXPECT_EQ(b.input_scale, calibrated ? a.input_scale : 0.0f) << info.name;
    }
    // Written back as compressed-tensors, then ModelOpt: the same weights as read, bit for bit.
    write_model_copy(*converted, dir / "again", ModelFormat::CompressedTensorsNvfp4);
    write_model_copy(*open_model(dir / "again"), dir / "as-modelopt", ModelFormat::ModeloptNvfp4);
    for (const fs::path& path : {dir / "again", dir / "as-modelopt"}) {
      const auto copy = open_model(path);
      for (const WeightInfo& info : converted->weights()) {
        const ModelWeight a = converted->load(info.name), b = copy->load(info.name);
        if (!info.nvfp4) continue;
        EXPECT_TRUE(same_bytes(a.nvfp4.codes, b.nvfp4.codes)) << info.name;
        EXPECT_EQ(a.nvfp4.tensor_scale, b.nvfp4.tensor_scale) << path << " " << info.name;
        EXPECT_EQ(a.input_scale, b.input_scale) << path << " " << info.name;
      }
    }
  }
}

TEST(CompressedTensors, SchemesItCannotRunAreRefused) {
  TempDir dir;
  const auto [modelopt_dir, ct_dir] = quantize_both(dir, false);
  const json good = read_json_file(ct_dir / "config.json");
  const auto with = [&](const std::function<void(json&)>& change) {
    json config = good;
    change(config["quantization_config"]);
    write_file(ct_dir / "config.json", config.dump(2));
  };
  with([](json& q) { q["config_groups"]["group_0"]["weights"]["num_bits"] = 8; });
  expect_error([&] { open_model(ct_dir); }, {"not NVFP4", "num_bits 8"});
  with([](json& q) { q["config_groups"]["group_0"]["weights"]["group_size"] = 32; });
  expect_error([&] { open_model(ct_dir); }, {"group_size 32"});
  with([](json& q) { q["config_groups"]["group_0"]["format"] = "pack-quantized"; });
  expect_error([&] { open_model(ct_dir); }, {"pack-quantized", "not supported"});
  with([](json& q) { q["transform_config"] = json{{"config_groups", json::object()}}; });
  expect_error([&] { open_model(ct_dir); }, {"transforms"});
  with([](json& q) { q["config_groups"]["group_1"] = q["config_groups"]["group_0"]; });
  EXPECT_EQ(open_model(ct_dir)->format(), ModelFormat::CompressedTensorsNvfp4);  // two NVFP4 groups are fine
  // Both ModelOpt's and compressed-tensors' descriptions: which one holds is not guessed.
  with([](json&) {});
  write_file(ct_dir / "hf_quant_config.json", "{}");
  expect_error([&] { open_model(ct_dir); }, {"hf_quant_config.json", "compressed-tensors"});
}

}  // namespace
}  // namespace nvfp4lm::test::test_compressed_tensors
