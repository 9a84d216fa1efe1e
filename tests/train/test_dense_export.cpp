// export_dense_model (train/dense_export.h): the F# predecessor's dense `.dat` (its step 1) and the dense BF16 copy of
// any model. A dense `.dat` reads back bit for bit and quantizes to the same NVFP4 `.dat` (and ModelOpt directory) as
// the model it came from; an untied lm_head travels; NVFP4 weights are written dequantized; a narrower dtype's rounding
// is counted and its overflow refused; a name ending in .dat is one file with the small files beside it.
#include <gtest/gtest.h>

#include <cmath>

#include "core/json_text.h"
#include "io/io_test_util.h"
#include "io/model_files.h"
#include "io/quantize_model.h"
#include "train/dense_export.h"
#include "train/tensor_model_files.h"

namespace nvfp4lm::test::test_dense_export {
namespace {

ExportReport dense_copy(const fs::path& model, const fs::path& out, ModelFormat format,
                        std::optional<DType> dtype = std::nullopt) {
  const auto source = open_model(model);
  return export_dense_model(*source, model_export_source(*source), out, {.format = format, .dtype = dtype});
}

void expect_same_dense_weights(const ModelFiles& a, const ModelFiles& b) {
  ASSERT_EQ(a.weights().size(), b.weights().size());
  for (const WeightInfo& info : a.weights()) {
    const ModelWeight x = a.load(info.name), y = b.load(info.name);
    ASSERT_FALSE(x.is_nvfp4() || y.is_nvfp4()) << info.name;
    EXPECT_EQ(x.dense.dtype(), y.dense.dtype()) << info.name;
    EXPECT_TRUE(same_bytes(x.dense, y.dense)) << info.name;
  }
}

TEST(DenseExport, DatReadsBackBitForBitAndQuantizesLikeItsSource) {
  TempDir dir;
  for (const bool tied : {true, false}) {
    SCOPED_TRACE(tied ? "tied lm_head" : "untied lm_head");
    const std::string tag = tied ? "tied" : "untied";
    const fs::path hf = synth_small(dir, "hf-" + tag, tied);
    const ExportReport report = dense_copy(hf, dir / ("dense-" + tag), ModelFormat::Dat);
    EXPECT_TRUE(report.dense);
    EXPECT_EQ(report.dense_dtype, DType::BF16);  // the model's torch_dtype
    EXPECT_EQ(report.rounded_values, 0);
    const auto source = open_model(hf);
    const auto dat = open_model(dir / ("dense-" + tag) / "model.dat");
    EXPECT_EQ(dat->format(), ModelFormat::Dat);
    EXPECT_EQ(dat->find("lm_head.weight") != nullptr, !tied);
    expect_same_dense_weights(*source, *dat);
    EXPECT_EQ(dat->config_json().value("tie_word_embeddings", true), tied);

    for (const ModelFormat format : {ModelFormat::Dat, ModelFormat::ModeloptNvfp4}) {
      QuantizeOptions options;
      options.format = format;
      const std::string name = std::string(model_format_name(format)) + "-" + tag;
      quantize_model(*source, dir / ("from-hf-" + name), options);
      quantize_model(*dat, dir / ("from-dat-" + name), options);
      const std::string file = format == ModelFormat::Dat ? "model.dat" : "model.safetensors";
      EXPECT_EQ(read_file(dir / ("from-hf-" + name) / file), read_file(dir / ("from-dat-" + name) / file)) << name;
    }
  }
}

TEST(DenseExport, Nvfp4WeightsAreWrittenDequantized) {
  TempDir dir;
  QuantizeOptions quantize;
  quantize.format = ModelFormat::Dat;
  quantize_model(*open_model(synth_small(dir, "hf")), dir / "nvfp4", quantize);
  const auto nvfp4 = open_model(dir / "nvfp4");
  for (const ModelFormat format : {ModelFormat::Dat, ModelFormat::HfSafetensors}) {
    const fs::path out = dir / std::string(model_format_name(format));
    const ExportReport report = dense_copy(dir / "nvfp4", out, format);
    EXPECT_EQ(report.dequantized_tensors, 14);  // 2 layers x 7 projections
    EXPECT_EQ(report.rounded_values, 0);        // tensor scale 1: every value fits BF16
    const auto dense = open_model(format == ModelFormat::Dat ? out / "model.dat" : out);
    EXPECT_FALSE(dense->config_json().contains("quantization_config"));
    for (const WeightInfo& info : nvfp4->weights()) {
      const ModelWeight original = nvfp4->load(info.name), copy = dense->load(info.name);
      ASSERT_FALSE(copy.is_nvfp4()) << info.name;
      EXPECT_EQ(copy.dense.dtype(), DType::BF16) << info.name;
      if (!original.is_nvfp4()) continue;
      Tensor as_f32 = Tensor::empty(copy.dense.shape(), DType::F32);
      convert_cpu(copy.dense, as_f32);
      EXPECT_TRUE(same_bytes(as_f32, dequantize_nvfp4(original.nvfp4, DType::F32))) << info.name;
    }
  }
}

// F32 weights of the small model, one of them changed by `edit`, as a model in memory (a checkpoint's masters).
struct F32Model {
  nlohmann::json config;
  std::vector<NamedTensor> weights;
  std::unique_ptr<ModelFiles> files;
};
F32Model f32_model(const fs::path& hf, const std::function<void(float*)>& edit_norm) {
  const auto source = open_model(hf);
  F32Model model;
  model.config = source->config_json();
  for (const WeightInfo& info : source->weights()) {
    Tensor values = Tensor::empty(info.shape, DType::F32);
    convert_cpu(source->load(info.name).dense, values);
    if (info.name == "model.norm.weight") edit_norm(values.data<float>());
    model.weights.push_back({info.name, values});
  }
  model.files = tensor_model_files(model.config, model.weights, "masters");
  return model;
}

TEST(DenseExport, NarrowerDtypeRoundingIsCountedAndOverflowRefused) {
  TempDir dir;
  const fs::path hf = synth_small(dir, "hf");
  ExportSource source;
  source.config_json = open_model(hf)->config_json();

  const F32Model fine = f32_model(hf, [](float* norm) {
    norm[0] = 1.0f + 1.0f / 4096;  // between two F16 (and BF16) values
    norm[1] = 1e-9f;               // below F16's smallest subnormal
  });
  const ExportReport f16 =
      export_dense_model(*fine.files, source, dir / "f16.dat", {.format = ModelFormat::Dat, .dtype = DType::F16});
  EXPECT_GE(f16.rounded_values, 2);
  EXPECT_TRUE(fs::is_regular_file(dir / "f16.dat"));  // one file, the small files beside it
  EXPECT_TRUE(fs::is_regular_file(dir / "config.json"));
  const auto copy = open_model(dir / "f16.dat");
  EXPECT_EQ(copy->at("model.norm.weight").dtype, DType::F16);
  // One file: config.json as the model's (shared with its other .dat files; each .dat's entries say their type).
  EXPECT_EQ(copy->config_json().value("torch_dtype", ""), "bfloat16");
  const std::vector<float> norm = to_float_vector(copy->load("model.norm.weight").dense);
  EXPECT_EQ(norm[0], 1.0f);  // rounded to nearest even
  EXPECT_EQ(norm[1], 0.0f);
  const ExportReport f32 =
      export_dense_model(*fine.files, source, dir / "f32", {.format = ModelFormat::Dat, .dtype = DType::F32});
  EXPECT_EQ(f32.rounded_values, 0);
  expect_same_dense_weights(*fine.files, *open_model(dir / "f32" / "model.dat"));
  EXPECT_EQ(open_model(dir / "f32" / "model.dat")->config_json().value("torch_dtype", ""), "float32");

  const F32Model huge = f32_model(hf, [](float* norm) { norm[3] = 1e5f; });
  expect_error(
      [&] { export_dense_model(*huge.files, source, dir / "huge", {.format = ModelFormat::Dat, .dtype = DType::F16}); },
      {"model.norm.weight", "100000", "element 3", "overflows F16", "--dtype"});
  EXPECT_FALSE(fs::exists(dir / "huge"));
}

TEST(DenseExport, NeverOverwritesTheSourceNorAnExistingOutput) {
  TempDir dir;
  const fs::path hf = synth_small(dir, "hf");
  expect_error([&] { dense_copy(hf, hf, ModelFormat::Dat); }, {"the source model"});
  expect_error([&] { dense_copy(hf, hf / "inside", ModelFormat::Dat); }, {"the source model"});
  dense_copy(hf, dir / "out", ModelFormat::HfSafetensors);
  expect_error([&] { dense_copy(hf, dir / "out", ModelFormat::HfSafetensors); }, {"exists"});
}

}  // namespace
}  // namespace nvfp4lm::test::test_dense_export
