// Writes a Qwen3 model as one GGUF file that llama.cpp loads (the `gguf` format of quantize and export; called
// by io/model_writer.h). Weights arrive one at a time in plan order (as for every other format) and stream
// through; the header is written from the plan first.
//
// What each weight becomes (`type` is the --gguf-type of the export):
//   NVFP4 weight (type nvfp4)      ggml NVFP4, codes and scale bytes bit for bit (io/gguf_quants.h), plus a one-
//                                  element F32 "<name>.scale" holding the tensor scale, which llama.cpp multiplies
//                                  into the product, as for ModelOpt checkpoints (those tensors follow the weights).
//                                  A weight whose columns are not a multiple of 64 is an Error (ggml's block).
//   1-D weight (norms)             F32 (llama.cpp's norms take F32 only).
//   projections, dense             `type`: q4_0, q8_0, f16 or bf16, encoded here from the values.
//   embedding / untied lm_head     with nvfp4: as stored (bf16, f16 or f32, bit for bit); with q4_0: q6_K (what
//                                  llama-quantize picks for them); otherwise `type`.
// A quantized type whose block does not divide a row falls back to q8_0, then f16, with a log line, as
// llama-quantize does. The tokenizer (tokenizer.json / tokenizer_config.json) and the chat template go into the
// metadata (io/gguf_qwen3.h); OUT is written to a temporary sibling and renamed by finish().
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/tensor.h"
#include "io/gguf_writer.h"
#include "io/hf_config.h"
#include "quant/nvfp4.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm {

struct WeightPlan;

// "nvfp4", "q4_0", "q8_0", "f16", "bf16" (the values of --gguf-type); Error listing them otherwise.
gguf::GgmlType parse_gguf_type(std::string_view name);

class GgufModelWriter {
 public:
  // `overwrite`: replace an existing regular file at `out` (GgufWriter::begin).
  GgufModelWriter(const fs::path& out, const std::vector<WeightPlan>& plan, const Qwen3Config& config,
                  const Tokenizer& tokenizer, gguf::GgmlType type, bool overwrite);
  ~GgufModelWriter();
  GgufModelWriter(const GgufModelWriter&) = delete;
  GgufModelWriter& operator=(const GgufModelWriter&) = delete;

  void write_dense(const std::string& hf_name, const Tensor& tensor);
  void write_nvfp4(const std::string& hf_name, const Nvfp4Tensor& q);
  void finish();
  uint64_t bytes_written() const { return writer_.bytes_written(); }
  // The GGUF type chosen for a planned weight (for reports and tests).
  gguf::GgmlType type_of(const std::string& hf_name) const;

 private:
  struct Entry {
    std::string hf_name;
    GgufTensorSpec spec;
  };
  const Entry& entry(const std::string& hf_name) const;

  GgufWriter writer_;
  std::vector<Entry> entries_;
  std::vector<float> tensor_scales_;  // of the NVFP4 weights, in order, written last as "<name>.scale"
  std::vector<std::string> scale_names_;
};

}  // namespace nvfp4lm
