// Writes a model directory in any of the three formats, streaming weight by weight (used by quantize, synth
// and export). The caller declares the plan (every weight's HF name, logical shape, NVFP4 or dense dtype) up
// front, then supplies each weight in plan order: dense ones whole (write_dense, converting between float
// dtypes if needed) or in pieces (write_dense_bytes), NVFP4 ones as an Nvfp4Tensor. Layout of OUT (a directory
// but for gguf, written as a temporary sibling and published by finish() (core/publish.h: an existing OUT is
// refused unless overwrite, and then replaced only when it is a model directory, or a regular file for gguf); the
// temporary is removed if finish() is never reached):
//   hf-safetensors:  config.json, generation_config.json, model.safetensors, or model-0000i-of-0000n.safetensors
//                    + model.safetensors.index.json when the data exceeds max_shard_bytes
//   modelopt-nvfp4:  the same with NVFP4 weights as in io/modelopt.h, hf_quant_config.json, and the
//                    quantization_config block in config.json (exclude_modules: "lm_head" unless it is NVFP4);
//                    with `calibration`, a W4A4 export (quant_algo NVFP4, each input_scale measured), without
//                    it a weight-only one (W4A16_NVFP4, no input_scale; said in the log and hf_quant_config.json)
//   compressed-tensors-nvfp4: the same safetensors with NVFP4 weights as in io/compressed_tensors.h
//                    (weight_packed, weight_scale, weight_global_scale, and input_global_scale with `calibration`:
//                    the NVFP4 scheme, else NVFP4A16) and config.json's quantization_config as compressed-tensors
//                    writes it (ignore: "lm_head" unless it is NVFP4); no hf_quant_config.json
//   gguf:            OUT is one file (io/gguf_model_writer.h: weights, hyperparameters, and the tokenizer read from
//                    the tokenizer.json / tokenizer_config.json among copy_files), nothing else is written
//   dat:             model.dat (NVFP4 weights as "<layer>.qdata" type 100 + "<layer>.scale" type 101; the
//                    format has no tensor scale, so NVFP4 weights must have tensor_scale 1), config.json,
//                    generation_config.json
// plus the files listed in copy_files (tokenizer.json, ...), copied as they are.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/tensor.h"
#include "io/activation_calibration.h"
#include "io/gguf_format.h"
#include "io/model_files.h"
#include "quant/nvfp4.h"

namespace nvfp4lm {

inline constexpr uint64_t kDefaultMaxShardBytes = 4'000'000'000;  // 4 GB, like HF's "4GB" max_shard_size
inline constexpr const char* kDatFileName = "model.dat";

// What OUT of `format` is: one file (gguf) or a directory (the others).
inline OutputKind model_output_kind(ModelFormat format) {
  return format == ModelFormat::Gguf ? OutputKind::File : OutputKind::Directory;
}

struct WeightPlan {
  std::string name;  // HF name
  Shape shape;       // logical ([out, in] for NVFP4)
  bool nvfp4 = false;
  DType dtype = DType::BF16;  // dense weights: the dtype stored
};

struct ModelWriterOptions {
  bool overwrite = false;
  uint64_t max_shard_bytes = kDefaultMaxShardBytes;
  nlohmann::json config_json;  // config.json content (quantization_config is replaced / removed per format)
  std::optional<nlohmann::json> generation_config;
  std::vector<fs::path> copy_files;  // copied into OUT under their file names
  // modelopt-nvfp4 and compressed-tensors-nvfp4: measured activation ranges, for every NVFP4 weight's input_scale
  // (Error when one is missing).
  std::optional<ActivationCalibration> calibration = std::nullopt;
  // gguf: the type of the projections (io/gguf_model_writer.h); NVFP4 takes NVFP4 weights, the others dense ones.
  gguf::GgmlType gguf_type = gguf::GgmlType::NVFP4;
};

class ModelWriter {
 public:
  ModelWriter(ModelFormat format, const fs::path& out_dir, std::vector<WeightPlan> plan, ModelWriterOptions options);
  ~ModelWriter();
  ModelWriter(const ModelWriter&) = delete;
  ModelWriter& operator=(const ModelWriter&) = delete;

  void write_dense(const std::string& name, const Tensor& tensor);
  void write_dense_bytes(const std::string& name, const void* data, uint64_t bytes);
  void write_nvfp4(const std::string& name, const Nvfp4Tensor& q);
  void finish();

  const std::vector<WeightPlan>& plan() const { return plan_; }
  const fs::path& out_dir() const { return out_dir_; }
  // Number of safetensors shards (0 for .dat).
  size_t shard_count() const { return shard_files_.size(); }
  // Bytes of weight data written so far.
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  struct Impl;
  const WeightPlan& expect_next(const std::string& name, bool nvfp4);
  void advance_if_complete();
  void open_shard(size_t shard);
  void setup_writers();
  const fs::path& staging_dir() const;

  ModelFormat format_;
  fs::path out_dir_;
  std::unique_ptr<StagedDirectory> staging_;  // the temporary OUT (not for gguf, which has its own); before impl_
  std::vector<WeightPlan> plan_;
  ModelWriterOptions options_;
  size_t next_ = 0;               // plan index being written
  uint64_t next_written_ = 0;     // dense bytes of it written so far
  std::vector<size_t> shard_of_;  // plan index -> shard
  std::vector<std::string> shard_files_;
  std::unique_ptr<Impl> impl_;
  uint64_t bytes_written_ = 0;
  size_t inexact_global_scales_ = 0;  // compressed-tensors: tensor scales that are no float's reciprocal
  bool finished_ = false;
};

}  // namespace nvfp4lm
