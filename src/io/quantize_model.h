// Post-training NVFP4 quantization of a whole model file, streamed weight by weight (load one, quantize,
// write, release its pages) so peak memory stays near the largest single weight, whatever the model size.
//
// What is quantized, lm_head untying and the shape check: the plan export uses too (io/export_plan.h); embeddings,
// norms and anything else stay as stored (same dtype). Weights already NVFP4 in the source are copied when the
// target can hold them exactly (io/model_formats.h), and otherwise dequantized and requantized (reported as such).
// Tensor scales: 1 where the format stores none (`.dat`); otherwise amax / (6 * 448), shared by q/k/v and by
// gate/up of a layer because inference engines fuse them into one GEMM with one scale
// (quant/nvfp4_group_scale.h). This takes one extra read pass (the amax of every member first).
// GGUF (one file for llama.cpp, io/gguf_model_writer.h): with gguf_type nvfp4 the weights are quantized (or copied)
// exactly as for ModelOpt, tensor scales included; with q4_0 / q8_0 / f16 / bf16 nothing is NVFP4-quantized and the
// GGUF writer encodes the source values (dequantized first when the source is NVFP4).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "io/model_files.h"
#include "io/model_writer.h"
#include "quant/nvfp4.h"

namespace nvfp4lm {

struct QuantizeOptions {
  ModelFormat format = ModelFormat::ModeloptNvfp4;       // ModeloptNvfp4, Dat or Gguf
  gguf::GgmlType gguf_type = gguf::GgmlType::NVFP4;      // Gguf: the projections' type
  std::optional<fs::path> tokenizer_dir = std::nullopt;  // Gguf: the tokenizer to embed instead of the model's
  bool quantize_lm_head = false;
  Nvfp4Block block = Nvfp4Block::Row1x16;
  bool overwrite = false;
  uint64_t max_shard_bytes = kDefaultMaxShardBytes;
  // ModelOpt: measured activation ranges for the input_scale of every quantized weight (see io/model_writer.h);
  // none: a weight-only export (W4A16_NVFP4, io/modelopt.h).
  std::optional<ActivationCalibration> calibration = std::nullopt;
};

struct QuantizedWeightReport {
  std::string name;
  Shape shape;
  float tensor_scale = 1.0f;
  double relative_rms_error = 0;  // ||deq(q) - w|| / ||w|| against the source values
  std::string action;             // "quantized", "copied" (already NVFP4, kept bit for bit), "requantized"
};

struct QuantizeReport {
  std::vector<QuantizedWeightReport> weights;  // NVFP4 weights of the output, in order
  int64_t nvfp4_parameters = 0;
  int64_t dense_parameters = 0;
  double total_relative_rms_error = 0;  // over every weight quantized or requantized here
  uint64_t weight_bytes_written = 0;
  std::vector<std::string> copied_files;
  bool lm_head_untied = false;  // a tied lm_head was written as its own NVFP4 tensor
};

QuantizeReport quantize_model(const ModelFiles& source, const fs::path& out, const QuantizeOptions& options);

// Tokenizer and generation files that travel with a model, when present in the source.
std::vector<fs::path> model_side_files(const ModelFiles& source);
// What reading `source` reads, for guard_output: the model, its config, its tokenizer directory (for a `.dat`, whose
// directory may hold other models, the tokenizer files in it).
std::vector<GuardedInput> model_read_paths(const ModelFiles& source);

}  // namespace nvfp4lm
