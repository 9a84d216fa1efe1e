// Post-training quantization of whole models: synth -> quantize (ModelOpt and .dat) -> open, where every NVFP4
// weight read back must equal the codec's quantization of the source weight byte for byte; lm_head handling,
// conversions between NVFP4 formats, 2D blocks, and output safety (no silent overwrite, no temporaries left).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "io/dat_format.h"
#include "io/io_test_util.h"
#include "io/model_files.h"
#include "io/modelopt.h"
#include "io/quantize_model.h"
#include "io/safetensors_reader.h"
#include "io/synth_model.h"
#include "quant/nvfp4_fixed_scale.h"
#include "quant/tensor_amax.h"

namespace nvfp4lm::test::test_quantize_model {
namespace {

using json = nlohmann::json;

// Every NVFP4 weight of `quantized` must equal the quantization of the source weight with `tensor_scale_of`.
void expect_codec_exact(const ModelFiles& source, const ModelFiles& quantized,
                        const std::function<float(const std::string&)>& tensor_scale_of) {
  int nvfp4 = 0;
  for (const WeightInfo& info : quantized.weights()) {
    const ModelWeight got = quantized.load(info.name);
    if (!info.nvfp4) {
      EXPECT_TRUE(same_bytes(got.dense, source.load(info.name).dense)) << info.name;
      continue;
    }
    ++nvfp4;
    ASSERT_TRUE(got.is_nvfp4()) << info.name;
    const Tensor original = source.load(info.name).dense;
    const Nvfp4Tensor expected =
        quantize_nvfp4_with_tensor_scale(original, tensor_scale_of(info.name), Nvfp4Block::Row1x16, info.name);
    EXPECT_EQ(got.nvfp4.tensor_scale, expected.tensor_scale) << info.name;
    EXPECT_TRUE(same_bytes(got.nvfp4.codes, expected.codes)) << info.name;
    EXPECT_TRUE(same_bytes(got.nvfp4.block_scales, expected.block_scales)) << info.name;
    // And therefore the values the model sees are the codec's dequantization.
    EXPECT_TRUE(same_bytes(dequantize_nvfp4(got.nvfp4, DType::F32), dequantize_nvfp4(expected, DType::F32)));
  }
  EXPECT_EQ(nvfp4, 14);  // 7 projections x 2 layers
}

TEST(Quantize, ModeloptRoundTripIsCodecExact) {
  TempDir dir;
  const fs::path hf = synth_small(dir, "hf");
  const auto source = open_model(hf);
  QuantizeOptions options;
  options.format = ModelFormat::ModeloptNvfp4;
  const QuantizeReport report = quantize_model(*source, dir / "mo", options);
  EXPECT_EQ(report.weights.size(), 14u);
  EXPECT_GT(report.total_relative_rms_error, 0.05);
  EXPECT_LT(report.total_relative_rms_error, 0.15);
  const auto quantized = open_model(dir / "mo");
  EXPECT_EQ(quantized->format(), ModelFormat::ModeloptNvfp4);

  // o_proj and down_proj are their own scale group: exactly the codec's quantize_nvfp4.
  for (const char* name : {"model.layers.0.self_attn.o_proj.weight", "model.layers.1.mlp.down_proj.weight"}) {
    const Nvfp4Tensor codec = quantize_nvfp4(source->load(name).dense);
    const Nvfp4Tensor got = quantized->load(name).nvfp4;
    EXPECT_EQ(got.tensor_scale, codec.tensor_scale);
    EXPECT_TRUE(same_bytes(got.codes, codec.codes)) << name;
    EXPECT_TRUE(same_bytes(got.block_scales, codec.block_scales)) << name;
  }
  // q/k/v and gate/up share the tensor scale of their joint amax (what vLLM's fused GEMMs need).
  auto group_scale = [&](const std::string& name) {
    std::vector<std::string> members = {name};
    const std::string group = fused_scale_group(name);
    if (group != name) {
      members.clear();
      const std::string prefix = group.substr(0, group.rfind('.') + 1);
      const bool qkv = group.ends_with("qkv");
      for (const char* m : qkv ? std::vector<const char*>{"q_proj", "k_proj", "v_proj"}
                               : std::vector<const char*>{"gate_proj", "up_proj"})
        members.push_back(prefix + m + ".weight");
    }
    float amax = 0;
    for (const auto& member : members) amax = std::max(amax, tensor_amax(source->load(member).dense, member));
    return nvfp4_tensor_scale(amax);
  };
  expect_codec_exact(*source, *quantized, group_scale);
  EXPECT_EQ(quantized->load("model.layers.0.self_attn.q_proj.weight").nvfp4.tensor_scale,
            quantized->load("model.layers.0.self_attn.v_proj.weight").nvfp4.tensor_scale);

  // The ModelOpt file layout.
  const auto file = SafetensorsFile::open(dir / "mo" / "model.safetensors");
  const auto& weight = file->at("model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(weight.dtype, DType::U8);
  EXPECT_EQ(weight.shape, (Shape{64, 32}));
  const auto& block_scale = file->at("model.layers.0.self_attn.q_proj.weight_scale");
  EXPECT_EQ(block_scale.dtype, DType::E4M3);
  EXPECT_EQ(block_scale.shape, (Shape{64, 4}));
  const auto& scale_2 = file->at("model.layers.0.self_attn.q_proj.weight_scale_2");
  EXPECT_EQ(scale_2.dtype, DType::F32);
  EXPECT_EQ(scale_2.shape.rank(), 0);
  // Uncalibrated: weight-only, no input_scale anywhere (never a placeholder an engine would use).
  for (const auto& entry : file->entries()) EXPECT_FALSE(entry.name.ends_with(".input_scale")) << entry.name;
  EXPECT_EQ(file->at("model.embed_tokens.weight").dtype, DType::BF16);
  EXPECT_FALSE(file->find("lm_head.weight"));

  const json quant_config = json::parse(read_file(dir / "mo" / "hf_quant_config.json"));
  EXPECT_EQ(quant_config["producer"]["name"], "nvfp4lm");
  EXPECT_EQ(quant_config["quantization"]["quant_algo"], "W4A16_NVFP4");
  EXPECT_EQ(quant_config["quantization"]["group_size"], 16);
  EXPECT_TRUE(quant_config["quantization"]["kv_cache_quant_algo"].is_null());
  EXPECT_EQ(quant_config["quantization"]["exclude_modules"], json({"lm_head"}));
  const json config = json::parse(read_file(dir / "mo" / "config.json"));
  EXPECT_EQ(config["quantization_config"]["quant_method"], "modelopt");
  EXPECT_EQ(config["quantization_config"]["quant_algo"], "W4A16_NVFP4");
  EXPECT_TRUE(config["quantization_config"]["config_groups"]["group_0"]["input_activations"].is_null());
  EXPECT_EQ(config["quantization_config"]["ignore"], json({"lm_head"}));
  EXPECT_EQ(config["quantization_config"]["config_groups"]["group_0"]["weights"]["group_size"], 16);
  EXPECT_EQ(config["quantization_config"]["config_groups"]["group_0"]["weights"]["num_bits"], 4);
  EXPECT_TRUE(config["tie_word_embeddings"].get<bool>());
}

TEST(Quantize, DatRoundTripIsCodecExactWithTensorScaleOne) {
  TempDir dir;
  const fs::path hf = synth_small(dir, "hf");
  const auto source = open_model(hf);
  QuantizeOptions options;
  options.format = ModelFormat::Dat;
  quantize_model(*source, dir / "dat", options);
  EXPECT_TRUE(fs::exists(dir / "dat" / "model.dat"));
  EXPECT_TRUE(fs::exists(dir / "dat" / "config.json"));
  const auto quantized = open_model(dir / "dat");
  EXPECT_EQ(quantized->format(), ModelFormat::Dat);
  expect_codec_exact(*source, *quantized, [](const std::string&) { return 1.0f; });
  // The file itself: "<layer>.qdata" type 100 [out, in/2] and "<layer>.scale" type 101 [out, in/16].
  const auto file = DatFile::open(dir / "dat" / "model.dat");
  const DatEntry& qdata = file->at("model.layers.1.mlp.gate_proj.qdata");
  EXPECT_EQ(qdata.type, DatType::E2M1x2);
  EXPECT_EQ(qdata.dims, (std::vector<int64_t>{128, 32}));
  const DatEntry& scale = file->at("model.layers.1.mlp.gate_proj.scale");
  EXPECT_EQ(scale.type, DatType::E4M3);
  EXPECT_EQ(scale.dims, (std::vector<int64_t>{128, 4}));
  EXPECT_EQ(file->at("model.norm.weight").type, DatType::BF16);
  // Opening the .dat file itself (config.json beside it) gives the same model.
  EXPECT_EQ(open_model(dir / "dat" / "model.dat")->weights().size(), quantized->weights().size());
}

TEST(Quantize, TiedLmHeadBecomesItsOwnNvfp4Tensor) {
  TempDir dir;
  const auto source = open_model(synth_small(dir, "hf"));
  QuantizeOptions options;
  options.quantize_lm_head = true;
  const QuantizeReport report = quantize_model(*source, dir / "mo", options);
  EXPECT_TRUE(report.lm_head_untied);
  EXPECT_EQ(report.weights.size(), 15u);
  const auto quantized = open_model(dir / "mo");
  EXPECT_FALSE(quantized->config().tie_word_embeddings);
  const WeightInfo& head = quantized->at("lm_head.weight");
  EXPECT_TRUE(head.nvfp4);
  EXPECT_EQ(head.kind, WeightKind::LmHead);
  const Nvfp4Tensor codec = quantize_nvfp4(source->load("model.embed_tokens.weight").dense);
  EXPECT_TRUE(same_bytes(quantized->load("lm_head.weight").nvfp4.codes, codec.codes));
  EXPECT_FALSE(quantized->at("model.embed_tokens.weight").nvfp4);
  const json quant_config = json::parse(read_file(dir / "mo" / "hf_quant_config.json"));
  EXPECT_EQ(quant_config["quantization"]["exclude_modules"], json::array());
  // Recorded in the checkpoint, not only in the log: what an engine reading it meets (issue 49).
  EXPECT_NE(quant_config["nvfp4lm"]["lm_head"].get<std::string>().find("vLLM"), std::string::npos);
  EXPECT_EQ(json::parse(read_file(dir / "mo" / "config.json"))["quantization_config"]["ignore"], json::array());

  // An untied source keeps its lm_head dense unless asked.
  const auto untied = open_model(synth_small(dir, "untied", false));
  quantize_model(*untied, dir / "untied-dat", QuantizeOptions{ModelFormat::Dat});
  const auto untied_dat = open_model(dir / "untied-dat");
  EXPECT_FALSE(untied_dat->at("lm_head.weight").nvfp4);
  EXPECT_TRUE(same_bytes(untied_dat->load("lm_head.weight").dense, untied->load("lm_head.weight").dense));
}

TEST(Quantize, ConvertsBetweenNvfp4Formats) {
  TempDir dir;
  const auto source = open_model(synth_small(dir, "hf"));
  quantize_model(*source, dir / "dat", QuantizeOptions{ModelFormat::Dat});
  quantize_model(*source, dir / "mo", QuantizeOptions{ModelFormat::ModeloptNvfp4});
  const auto dat = open_model(dir / "dat");
  const auto mo = open_model(dir / "mo");

  // .dat -> ModelOpt: tensor scale 1 is valid there, codes are copied bit for bit.
  const QuantizeReport copied = quantize_model(*dat, dir / "dat-mo", QuantizeOptions{ModelFormat::ModeloptNvfp4});
  for (const auto& weight : copied.weights) EXPECT_EQ(weight.action, "copied") << weight.name;
  const auto dat_mo = open_model(dir / "dat-mo");
  for (const WeightInfo& info : dat->weights()) {
    if (!info.nvfp4) continue;
    EXPECT_TRUE(same_bytes(dat_mo->load(info.name).nvfp4.codes, dat->load(info.name).nvfp4.codes));
    EXPECT_EQ(dat_mo->load(info.name).nvfp4.tensor_scale, 1.0f);
  }
  // ModelOpt -> .dat: tensor scales are not 1, so weights are requantized from their dequantized values.
  const QuantizeReport requantized = quantize_model(*mo, dir / "mo-dat", QuantizeOptions{ModelFormat::Dat});
  for (const auto& weight : requantized.weights) EXPECT_EQ(weight.action, "requantized") << weight.name;
  const auto mo_dat = open_model(dir / "mo-dat");
  const std::string name = "model.layers.0.mlp.up_proj.weight";
  const Tensor values = dequantize_nvfp4(mo->load(name).nvfp4, DType::F32);
  EXPECT_TRUE(same_bytes(mo_dat->load(name).nvfp4.codes,
                         quantize_nvfp4_with_tensor_scale(values, 1.0f, Nvfp4Block::Row1x16, name).codes));
}

// A W4A4 checkpoint (input_scale on its NVFP4 weights) converted without --calibrate: a ModelOpt output keeps the
// activation scales as stored (a W4A4 checkpoint still, "calibrated" in hf_quant_config.json); a .dat stores none.
TEST(Quantize, AW4a4CheckpointKeepsItsInputScalesInAModeloptOutput) {
  TempDir dir;
  const auto source = open_model(synth_small(dir, "hf"));
  QuantizeOptions calibrated;
  calibrated.calibration = ActivationCalibration{};
  calibrated.calibration->source = "test";
  float amax = 1.0f;
  for (const WeightInfo& info : source->weights())
    if (info.kind && info.shape.rank() == 2 && info.name.find("layers.") != std::string::npos)
      calibrated.calibration->observe(info.name, amax += 0.25f);
  quantize_model(*source, dir / "w4a4", calibrated);
  const auto w4a4 = open_model(dir / "w4a4");
  quantize_model(*w4a4, dir / "again", QuantizeOptions{ModelFormat::ModeloptNvfp4});
  const auto again = open_model(dir / "again");
  EXPECT_TRUE(modelopt_input_scales_calibrated(dir / "again"));
  int kept = 0;
  for (const WeightInfo& info : w4a4->weights()) {
    if (!info.nvfp4) continue;
    const float input_scale = w4a4->load(info.name).input_scale;
    EXPECT_GT(input_scale, 0.0f) << info.name;
    EXPECT_EQ(again->load(info.name).input_scale, input_scale) << info.name;
    ++kept;
  }
  EXPECT_EQ(kept, 14);
  quantize_model(*w4a4, dir / "dat", QuantizeOptions{ModelFormat::Dat});
  const auto dat = open_model(dir / "dat");
  for (const WeightInfo& info : dat->weights()) {
    if (info.nvfp4) {
      EXPECT_EQ(dat->load(info.name).input_scale, 0.0f) << info.name;
    }
  }
}

TEST(Quantize, NeverOverwritesWithoutAskingNorTheSource) {
  TempDir dir;
  const fs::path hf = synth_small(dir, "hf");
  const auto source = open_model(hf);
  fs::create_directories(dir / "out");
  write_file(dir / "out" / "config.json", "{}");  // an earlier model there
  write_file(dir / "out" / "keep.txt", "mine");
  expect_error([&] { quantize_model(*source, dir / "out", QuantizeOptions{}); }, {"out", "--overwrite"});
  EXPECT_EQ(read_file(dir / "out" / "keep.txt"), "mine");
  QuantizeOptions overwrite;
  overwrite.overwrite = true;
  // --overwrite replaces a model directory, never one that holds something else (core/publish.h).
  fs::create_directories(dir / "photos" / "2024");
  write_file(dir / "photos" / "config.json", "{}");
  expect_error([&] { quantize_model(*source, dir / "photos", overwrite); }, {"photos", "model directory only"});
  EXPECT_TRUE(fs::is_directory(dir / "photos" / "2024"));
  quantize_model(*source, dir / "out", overwrite);
  EXPECT_FALSE(fs::exists(dir / "out" / "keep.txt"));
  EXPECT_TRUE(fs::exists(dir / "out" / "hf_quant_config.json"));
  expect_error([&] { quantize_model(*source, hf, overwrite); }, {"is the source model"});
  // No temporary directories are left behind.
  for (const auto& item : fs::directory_iterator(dir.path()))
    EXPECT_EQ(item.path().filename().string().find(".tmp-"), std::string::npos) << item.path();
}

TEST(Quantize, TwoDimensionalBlocks) {
  TempDir dir;
  const auto source = open_model(synth_small(dir, "hf"));
  QuantizeOptions options;
  options.block = Nvfp4Block::Tile16x16;
  quantize_model(*source, dir / "mo", options);
  const auto quantized = open_model(dir / "mo");
  const std::string name = "model.layers.1.self_attn.o_proj.weight";
  Nvfp4QuantOptions codec_options;
  codec_options.block = Nvfp4Block::Tile16x16;
  const Nvfp4Tensor codec = quantize_nvfp4(source->load(name).dense, codec_options);
  EXPECT_TRUE(same_bytes(quantized->load(name).nvfp4.block_scales, codec.block_scales));
  EXPECT_TRUE(same_bytes(quantized->load(name).nvfp4.codes, codec.codes));
}

}  // namespace
}  // namespace nvfp4lm::test::test_quantize_model
