// Opening models: synth -> open (values equal synth_value, shards, F32), format detection and its errors, missing /
// misshapen / extra weights, legacy .dat variants (float scales, u8 scales, ".weight.qdata" keys).
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "core/numeric.h"
#include "io/dat_format.h"
#include "io/io_test_util.h"
#include "io/model_files.h"
#include "io/quantize_model.h"
#include "io/safetensors_reader.h"
#include "io/safetensors_writer.h"
#include "io/synth_model.h"
#include "quant/e4m3.h"
#include "quant/nvfp4_fixed_scale.h"

namespace nvfp4lm::test::test_model_files {
namespace {

using json = nlohmann::json;

// An HF directory with the expected weights of `config` (random BF16), minus `drop`, plus `extra` F32 tensors,
// with `reshape` giving one weight a different shape.
fs::path write_hf_model(const fs::path& out, const Qwen3Config& config, const std::string& drop = "",
                        const std::string& reshape = "", const std::string& extra = "",
                        DType reshape_dtype = DType::BF16) {
  fs::create_directories(out);
  write_file(out / "config.json", qwen3_config_to_json(config).dump());
  std::vector<SafetensorsEntrySpec> specs;
  for (const auto& weight : qwen3_expected_weights(config)) {
    if (weight.name == drop) continue;
    Shape shape = weight.shape;
    DType dtype = DType::BF16;
    if (weight.name == reshape) {
      shape = Shape{weight.shape[0] + 1};
      dtype = reshape_dtype;
    }
    specs.push_back({weight.name, dtype, shape});
  }
  if (!extra.empty()) specs.push_back({extra, DType::F32, Shape{4}});
  SafetensorsWriter writer(out / "model.safetensors", specs);
  for (const auto& spec : specs) {
    Tensor t = Tensor::zeros(spec.shape, spec.dtype);
    writer.write(spec.name, t);
  }
  writer.finish();
  return out;
}

TEST(Synth, ReproducibleAndEqualToSynthValue) {
  TempDir dir;
  const fs::path a = synth_small(dir, "a"), b = synth_small(dir, "b"), c = synth_small(dir, "c", true, 6);
  EXPECT_EQ(read_file(a / "model.safetensors"), read_file(b / "model.safetensors"));
  EXPECT_NE(read_file(a / "model.safetensors"), read_file(c / "model.safetensors"));
  const auto model = open_model(a);
  EXPECT_EQ(model->format(), ModelFormat::HfSafetensors);
  EXPECT_EQ(model->config(), [] {
    Qwen3Config expected = small_test_config();
    expected.torch_dtype = "bfloat16";
    return expected;
  }());
  EXPECT_FALSE(model->tokenizer_dir().has_value());
  EXPECT_TRUE(fs::exists(a / "generation_config.json"));
  const SynthOptions options = synth_options();
  for (const WeightInfo& info : model->weights()) {
    ASSERT_TRUE(info.kind.has_value()) << info.name;
    EXPECT_EQ(info.dtype, DType::BF16);
    const ModelWeight weight = model->load(info.name);
    ASSERT_FALSE(weight.is_nvfp4());
    EXPECT_FALSE(weight.dense.storage()->owned()) << "dense weights are zero-copy views of the file";
    const bool norm =
        *info.kind == WeightKind::QkNorm || *info.kind == WeightKind::LayerNorm || *info.kind == WeightKind::FinalNorm;
    const auto* values = weight.dense.data<uint16_t>();
    const int64_t step = std::max<int64_t>(1, info.shape.numel() / 997);
    for (int64_t i = 0; i < info.shape.numel(); i += step)
      ASSERT_EQ(values[i], float_to_bf16(synth_value(options, info.name, norm, i))) << info.name << " " << i;
    const std::vector<float> floats = to_float_vector(weight.dense);
    double mean = 0, square = 0;
    for (float v : floats) mean += v / floats.size();
    for (float v : floats) square += (v - mean) * (v - mean) / floats.size();
    if (norm) {
      EXPECT_NEAR(mean, 1.0, 0.1) << info.name;
      EXPECT_GT(square, 0.001) << info.name << " norms must not be all ones";
    } else if (floats.size() > 1000) {
      EXPECT_NEAR(mean, 0.0, 0.005) << info.name;
      EXPECT_NEAR(std::sqrt(square), 0.02, 0.002) << info.name;
    }
    model->release(info.name);
  }
}

TEST(Synth, ShardsWithAnIndexAndF32) {
  TempDir dir;
  const fs::path single = synth_small(dir, "single");
  SynthOptions options = synth_options();
  options.max_shard_bytes = 100'000;  // the 512x64 BF16 embedding alone is 65536 bytes
  const fs::path sharded = dir / "sharded";
  synth_model(small_test_config(), sharded, options);
  EXPECT_TRUE(fs::exists(sharded / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(sharded / "model.safetensors"));
  const json index = json::parse(read_file(sharded / "model.safetensors.index.json"));
  EXPECT_EQ(index["weight_map"]["model.embed_tokens.weight"], "model-00001-of-00003.safetensors");
  const auto a = open_model(single), b = open_model(sharded);
  EXPECT_EQ(b->data_files().size(), 3u);
  for (const WeightInfo& info : a->weights())
    EXPECT_TRUE(same_bytes(a->load(info.name).dense, b->load(info.name).dense)) << info.name;

  options.dtype = DType::F32;
  options.max_shard_bytes = kDefaultMaxShardBytes;
  synth_model(small_test_config(), dir / "f32", options);
  const auto f32 = open_model(dir / "f32");
  EXPECT_EQ(f32->config().torch_dtype, "float32");
  const Tensor w = f32->load("model.layers.1.mlp.up_proj.weight").dense;
  EXPECT_EQ(w.dtype(), DType::F32);
  EXPECT_EQ(w.data<float>()[77], synth_value(options, "model.layers.1.mlp.up_proj.weight", false, 77));
}

// --embedding-std: embed_tokens (and lm_head) drawn wider, every other weight as before, synth_value agreeing.
TEST(Synth, EmbeddingStdWidensOnlyTheEmbeddingAndHead) {
  TempDir dir;
  SynthOptions options = synth_options();
  options.dtype = DType::F32;
  Qwen3Config config = small_test_config();
  config.tie_word_embeddings = false;  // an lm_head of its own
  const fs::path plain = dir / "plain", wide = dir / "wide";
  synth_model(config, plain, options);
  options.embedding_std = 0.5f;
  synth_model(config, wide, options);
  const auto a = open_model(plain), b = open_model(wide);
  int widened = 0;
  for (const WeightInfo& info : a->weights()) {
    const Tensor before = a->load(info.name).dense, after = b->load(info.name).dense;
    const bool embedding = info.kind == WeightKind::Embedding || info.kind == WeightKind::LmHead;
    if (!embedding) {
      EXPECT_TRUE(same_bytes(before, after)) << info.name;
      continue;
    }
    const std::vector<float> x = to_float_vector(before), y = to_float_vector(after);
    for (size_t i = 0; i < x.size(); i += 97) EXPECT_FLOAT_EQ(y[i], x[i] * 25.0f) << info.name << " " << i;
    EXPECT_EQ(y[5], synth_value(options, info.name, false, 5));
    ++widened;
  }
  EXPECT_EQ(widened, 2);
}

// ---- legacy .dat variants ---------------------------------------------------------------------------------------

// Rewrites a .dat written by quantize: NVFP4 scales as `scale_type` (5 f16 / 6 f32 decoded values, or 0 u8
// bytes), keys "<layer>.weight.qdata" when weight_keys.
void rewrite_legacy_dat(const fs::path& from, const fs::path& to, DatType scale_type, bool weight_keys) {
  const auto file = DatFile::open(from);
  DatWriter writer(to, file->entries().size());
  for (const DatEntry& entry : file->entries()) {
    std::string key = entry.key;
    const bool qdata = key.ends_with(".qdata"), scale = key.ends_with(".scale");
    if (weight_keys && (qdata || scale)) key.insert(key.rfind('.'), ".weight");
    if (!scale || scale_type == DatType::E4M3) {
      writer.write(key, file->tensor(entry));
      continue;
    }
    writer.begin_entry(key, scale_type, entry.dims);
    const uint8_t* bytes = file->bytes_of(entry);
    for (uint64_t i = 0; i < entry.bytes; ++i) {
      const float value = e4m3_to_float(bytes[i]);
      if (scale_type == DatType::F32) {
        writer.write_bytes(&value, 4);
      } else if (scale_type == DatType::F16) {
        const uint16_t half = float_to_f16(value);
        writer.write_bytes(&half, 2);
      } else {
        writer.write_bytes(&bytes[i], 1);
      }
    }
  }
  writer.finish();
}

TEST(DatModel, LegacyScalesAndKeyVariants) {
  TempDir dir;
  const auto source = open_model(synth_small(dir, "hf"));
  quantize_model(*source, dir / "dat", QuantizeOptions{ModelFormat::Dat});
  const auto reference = open_model(dir / "dat");
  const std::string name = "model.layers.0.self_attn.k_proj.weight";
  const Tensor expected = dequantize_nvfp4(reference->load(name).nvfp4, DType::F32);
  for (DatType scale_type : {DatType::F32, DatType::F16, DatType::U8}) {
    for (bool weight_keys : {false, true}) {
      const fs::path legacy = dir / fmt::format("legacy-{}-{}", dat_type_name(scale_type), weight_keys);
      fs::create_directories(legacy);
      fs::copy_file(dir / "dat" / "config.json", legacy / "config.json");
      rewrite_legacy_dat(dir / "dat" / "model.dat", legacy / "old.dat", scale_type, weight_keys);
      const auto model = open_model(legacy / "old.dat");
      const WeightInfo& info = model->at(name);
      const ModelWeight weight = model->load(name);
      if (scale_type == DatType::U8) {
        EXPECT_TRUE(info.nvfp4);
        EXPECT_TRUE(same_bytes(weight.nvfp4.block_scales, reference->load(name).nvfp4.block_scales));
      } else {
        // Float scales: dequantized on load, exactly the codec's values.
        EXPECT_FALSE(info.nvfp4);
        EXPECT_NE(info.storage.find("dequantized"), std::string::npos) << info.storage;
        EXPECT_EQ(weight.dense.dtype(), DType::F32);
        EXPECT_TRUE(same_bytes(weight.dense, expected)) << dat_type_name(scale_type);
      }
    }
  }
}

TEST(DatModel, BrokenPairsAndDuplicates) {
  TempDir dir;
  const Qwen3Config config = small_test_config();
  write_file(dir / "config.json", qwen3_config_to_json(config).dump());
  auto dat_with = [&](const std::vector<std::pair<std::string, Tensor>>& entries) {
    const fs::path path = dir / "m.dat";
    fs::remove(path);
    DatWriter writer(path, entries.size());
    for (const auto& [key, tensor] : entries) writer.write(key, tensor);
    writer.finish();
    return path;
  };
  const Tensor codes = Tensor::zeros({64, 32}, DType::E2M1x2), scales = Tensor::zeros({64, 4}, DType::E4M3);
  const std::string q = "model.layers.0.self_attn.q_proj";
  expect_error(
      [&] {
        open_model(dat_with({{q + ".qdata", codes}}));
      },
      {"m.dat", "'" + q + ".qdata'", ".scale' is missing"});
  expect_error([&] { open_model(dat_with({{q + ".scale", scales}})); }, {"m.dat", "no matching"});
  expect_error(
      [&] {
        open_model(dat_with({{q + ".qdata", codes}, {q + ".scale", Tensor::zeros({64, 3}, DType::E4M3)}}));
      },
      {"'" + q + ".scale'", "[64, 3]", "[64, 4]"});
  expect_error(
      [&] {
        open_model(dat_with(
            {{q + ".qdata", codes}, {q + ".scale", scales}, {q + ".weight", Tensor::zeros({64, 64}, DType::BF16)}}));
      },
      {"'" + q + ".weight'", "second time"});
  expect_error(
      [&] {
        open_model(dat_with({{q + ".qdata", codes}, {q + ".scale", Tensor::zeros({64, 4}, DType::I32)}}));
      },
      {"block scales must be type 101"});
  // Complete pairs but the rest of the model missing.
  expect_error(
      [&] {
        open_model(dat_with({{q + ".qdata", codes}, {q + ".scale", scales}}));
      },
      {"'model.embed_tokens.weight'", "missing"});
}

// ---- detection --------------------------------------------------------------------------------------------------

TEST(OpenModel, DetectsFormatsAndExplainsFailures) {
  TempDir dir;
  const Qwen3Config config = small_test_config();
  expect_error([&] { open_model(dir / "absent"); }, {"absent", "does not exist"});

  const fs::path hf = synth_small(dir, "hf");
  fs::rename(hf / "config.json", dir / "elsewhere.json");
  expect_error([&] { open_model(hf); }, {"no config.json", "--config"});
  const auto with_config = open_model(hf, OpenModelOptions{dir / "elsewhere.json", std::nullopt});
  EXPECT_EQ(with_config->config_path(), dir / "elsewhere.json");
  EXPECT_EQ(with_config->config().num_hidden_layers, config.num_hidden_layers);
  expect_error(
      [&] {
        open_model(hf, OpenModelOptions{dir / "nope.json", std::nullopt});
      },
      {"nope.json", "does not exist"});
}

TEST(OpenModel, DetectionErrors) {
  TempDir dir;
  const Qwen3Config config = small_test_config();
  const fs::path empty = dir / "empty";
  fs::create_directories(empty);
  expect_error([&] { open_model(empty); }, {"empty", "found no model weights", "model.safetensors"});
  write_file(empty / "shard-1.safetensors", "x");
  expect_error([&] { open_model(empty); }, {"shard-1.safetensors", "without an index"});

  const fs::path hf = write_hf_model(dir / "hf", config);
  EXPECT_EQ(open_model(hf)->format(), ModelFormat::HfSafetensors);
  expect_error([&] { open_model(hf / "model.safetensors"); }, {"is a safetensors file", "model directory"});
  write_file(dir / "notes.txt", "hello");
  expect_error([&] { open_model(dir / "notes.txt"); }, {"notes.txt", "is not a model"});

  write_file(hf / "extra.dat", "");
  expect_error([&] { open_model(hf); }, {"both safetensors weights and .dat files", "extra.dat"});
  fs::remove(hf / "extra.dat");

  const fs::path dats = dir / "dats";
  fs::create_directories(dats);
  write_file(dats / "a.dat", "");
  write_file(dats / "b.dat", "");
  expect_error([&] { open_model(dats); }, {"several .dat files", "a.dat, b.dat"});
  fs::remove(dats / "b.dat");
  expect_error([&] { open_model(dats); }, {"no config.json"});
  write_file(dats / "config.json", qwen3_config_to_json(config).dump());
  expect_error([&] { open_model(dats); }, {"a.dat", "entry count", "truncated"});

  json quantized = qwen3_config_to_json(config);
  quantized["quantization_config"] = {{"quant_method", "gptq"}};
  write_file(hf / "config.json", quantized.dump());
  expect_error([&] { open_model(hf); }, {"config.json", "quant_method 'gptq'", "not supported"});
}

TEST(OpenModel, MissingMisshapenAndExtraWeights) {
  TempDir dir;
  const Qwen3Config config = small_test_config();
  expect_error([&] { open_model(write_hf_model(dir / "a", config, "model.layers.1.mlp.up_proj.weight")); },
               {"'model.layers.1.mlp.up_proj.weight'", "[128, 64]", "missing"});
  expect_error([&] { open_model(write_hf_model(dir / "b", config, "", "model.layers.0.self_attn.k_norm.weight")); },
               {"'model.layers.0.self_attn.k_norm.weight'", "shape [17]", "needs [16]"});
  Qwen3Config untied = config;
  untied.tie_word_embeddings = false;
  expect_error([&] { open_model(write_hf_model(dir / "c", untied, "lm_head.weight")); },
               {"'lm_head.weight'", "missing"});

  const auto extra =
      open_model(write_hf_model(dir / "d", config, "", "", "model.layers.0.self_attn.rotary_emb.inv_freq"));
  const WeightInfo& info = extra->at("model.layers.0.self_attn.rotary_emb.inv_freq");
  EXPECT_FALSE(info.kind.has_value());
  EXPECT_EQ(extra->weights().back().name, info.name);
  // Quantize keeps the extra tensor as it is.
  quantize_model(*extra, dir / "d-mo", QuantizeOptions{});
  EXPECT_EQ(open_model(dir / "d-mo")->at(info.name).dtype, DType::F32);
}

TEST(OpenModel, NonFloatDenseWeightAndTokenizerDirectory) {
  TempDir dir;
  const Qwen3Config config = small_test_config();
  const fs::path hf = dir / "hf";
  fs::create_directories(hf);
  write_file(hf / "config.json", qwen3_config_to_json(config).dump());
  std::vector<SafetensorsEntrySpec> specs;
  for (const auto& weight : qwen3_expected_weights(config))
    specs.push_back({weight.name, weight.name == "model.norm.weight" ? DType::I32 : DType::BF16, weight.shape});
  {
    SafetensorsWriter writer(hf / "model.safetensors", specs);
    for (const auto& spec : specs) writer.write(spec.name, Tensor::zeros(spec.shape, spec.dtype));
    writer.finish();
  }
  expect_error([&] { open_model(hf); }, {"'model.norm.weight'", "I32", "expected F32, BF16, F16"});

  const fs::path good = synth_small(dir, "good");
  write_file(good / "tokenizer.json", "{}");
  EXPECT_EQ(open_model(good)->tokenizer_dir(), good);
  expect_error(
      [&] {
        open_model(good, OpenModelOptions{std::nullopt, dir / "nowhere"});
      },
      {"nowhere", "no tokenizer.json"});
  // quantize carries the tokenizer and generation config along.
  const QuantizeReport report = quantize_model(*open_model(good), dir / "q", QuantizeOptions{ModelFormat::Dat});
  EXPECT_EQ(read_file(dir / "q" / "tokenizer.json"), "{}");
  EXPECT_TRUE(fs::exists(dir / "q" / "generation_config.json"));
  EXPECT_EQ(report.copied_files.size(), 2u);
}

}  // namespace
}  // namespace nvfp4lm::test::test_model_files
