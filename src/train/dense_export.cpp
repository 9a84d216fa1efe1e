// See dense_export.h.
#include "train/dense_export.h"

#include <chrono>
#include <cmath>

#include "core/error.h"
#include "core/logging.h"
#include "core/memory.h"
#include "io/model_writer.h"
#include "io/quantize_model.h"

namespace nvfp4lm {
namespace {

// `values` in `dtype`, with the number of values the conversion changed. Error when one overflows to infinity.
Tensor to_dense_dtype(const Tensor& values, DType dtype, const std::string& what, int64_t& rounded) {
  if (values.dtype() == dtype) return values;
  Tensor out = Tensor::empty(values.shape(), dtype);
  convert_cpu(values, out);
  if (dtype == DType::F32) return out;  // widening: exact
  Tensor wide = values.contiguous();    // what was asked for, as F32 (NVFP4 weights come dequantized to F32 already)
  if (wide.dtype() != DType::F32) {
    wide = Tensor::empty(values.shape(), DType::F32);
    convert_cpu(values, wide);
  }
  Tensor back = Tensor::empty(values.shape(), DType::F32);
  convert_cpu(out, back);
  const float* a = wide.data<float>();
  const float* b = back.data<float>();
  for (int64_t i = 0; i < values.numel(); ++i) {
    if (a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))) continue;
    NVFP4LM_CHECK(std::isfinite(b[i]) || !std::isfinite(a[i]),
                  "{}: value {} (element {}) overflows {}: a dense copy in {} would compute something else; choose a "
                  "wider --dtype (bf16 or f32)",
                  what, a[i], i, dtype_name(dtype), dtype_name(dtype));
    ++rounded;
  }
  return out;
}

// set_torch_dtype: config.json names `dtype`; false for the one-file `.dat` layout, whose config.json the model's
// other `.dat` files beside it share (the predecessor's directory held its FP16 and NVFP4 .dat with one config.json;
// each .dat's entries say their own type).
ExportReport write_dense_directory(const ModelFiles& model, const ExportSource& source, const fs::path& out,
                                   ModelFormat format, DType dtype, bool overwrite, bool set_torch_dtype) {
  ExportReport report;
  report.out = out;
  report.format = format;
  report.dense = true;
  report.dense_dtype = dtype;
  std::vector<WeightPlan> plan;
  for (const WeightInfo& info : model.weights())
    if (info.kind) plan.push_back({info.name, info.shape, /*nvfp4=*/false, dtype});  // others: the model ignores them

  ModelWriterOptions writer_options;
  writer_options.overwrite = overwrite;
  writer_options.config_json = source.config_json;
  if (set_torch_dtype) writer_options.config_json["torch_dtype"] = torch_dtype_name(dtype);
  writer_options.generation_config = source.generation_config;
  for (const fs::path& file : source.side_files) {
    const std::string name = file.filename().string();
    if (name == "config.json" || (name == "generation_config.json" && source.generation_config)) continue;
    writer_options.copy_files.push_back(file);
    report.copied_files.push_back(name);
  }
  ModelWriter writer(format, out, plan, writer_options);
  for (const WeightPlan& weight : plan) {
    const ModelWeight loaded = model.load(weight.name);
    const std::string what = model.path().string() + ": " + weight.name;
    if (loaded.is_nvfp4()) ++report.dequantized_tensors;
    const Tensor values = loaded.is_nvfp4() ? dequantize_nvfp4(loaded.nvfp4, DType::F32) : loaded.dense;
    writer.write_dense(weight.name, to_dense_dtype(values, dtype, what, report.rounded_values));
    model.release(weight.name);
    ++report.dense_tensors;
    report.parameters += weight.shape.numel();
  }
  writer.finish();
  report.weight_bytes = writer.bytes_written();
  return report;
}

}  // namespace

ExportSource model_export_source(const ModelFiles& model) {
  ExportSource source;
  source.config_json = model.config_json();
  // generation_config.json among them, copied byte for byte (a .dat's neighbours are compared byte for byte).
  source.side_files = model_side_files(model);
  source.protected_paths = model_read_paths(model);
  return source;
}

ExportReport export_dense_model(const ModelFiles& model, const ExportSource& source, const fs::path& out,
                                const DenseExportOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const MemoryPhase phase("export");
  NVFP4LM_CHECK(options.format == ModelFormat::HfSafetensors || options.format == ModelFormat::Dat,
                "a dense copy is written as hf-safetensors or dat, not {}", model_format_name(options.format));
  const DType dtype = options.dtype.value_or(torch_dtype_of(source.config_json).value_or(DType::BF16));
  NVFP4LM_CHECK(dtype == DType::BF16 || dtype == DType::F32 || dtype == DType::F16,
                "a dense copy is written in bf16, f32 or f16, not {}", dtype_name(dtype));
  ExportReport report;
  if (options.format == ModelFormat::Dat && out.extension() == ".dat") {
    report = export_as_dat_file(out, source, options.overwrite, [&](const fs::path& dir, const ExportSource& staged) {
      return write_dense_directory(model, staged, dir, ModelFormat::Dat, dtype, /*overwrite=*/false,
                                   /*set_torch_dtype=*/false);
    });
  } else {
    check_export_target(out, source, options.overwrite, model_output_kind(options.format));
    report = write_dense_directory(model, source, out, options.format, dtype, options.overwrite,
                                   /*set_torch_dtype=*/true);
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace nvfp4lm
