// Dense copies of a model: every weight written in one float dtype, NVFP4 weights dequantized (code x block scale x
// tensor scale), as Hugging Face safetensors (`export MODEL OUT --format bf16`: what PEFT, transformers and a merge
// take as a base) or as the F# predecessor's dense `.dat` (`--format dense-dat`: its step 1, HF -> FP16 `.dat`, which
// its step 2 quantized). The source is any model open_model reads, or a checkpoint's masters (train/
// tensor_model_files.h); config.json loses quantization_config and names the dtype (torch_dtype; not in the one-file
// `.dat` layout, whose config.json the model's other .dat files share); lm_head is written when the model has its own
// (untied).
//
// Exactness: a weight whose dtype is the target's is copied bit for bit; a wider one is rounded to nearest even and
// the values that change are counted (reported, not hidden); a value that overflows the target (|x| > 65504 in F16)
// is an Error naming the weight, since the copy would compute something else. Dequantized NVFP4 values are exact in
// F32 and in BF16/F16 whenever code x block scale x tensor scale fits, which holds for tensor scale 1.
#pragma once

#include <optional>

#include "io/model_files.h"
#include "train/export.h"

namespace nvfp4lm {

struct DenseExportOptions {
  ModelFormat format = ModelFormat::HfSafetensors;  // HfSafetensors or Dat
  std::optional<DType> dtype;                       // default: config.json's torch_dtype, else BF16
  bool overwrite = false;
};

// What an export of the model `model` carries besides its weights (its config, generation config and tokenizer
// files), and what the export may not overwrite (the model's files).
ExportSource model_export_source(const ModelFiles& model);

// Writes OUT (a directory; for the Dat format a name ending in ".dat" writes that one file with the small files
// beside it, as export_dat_file does). Streams weight by weight.
ExportReport export_dense_model(const ModelFiles& model, const ExportSource& source, const fs::path& out,
                                const DenseExportOptions& options);

}  // namespace nvfp4lm
