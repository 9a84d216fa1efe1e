// Writing a model's weights into another format without changing them (parity's format copies; DESIGN.md §4):
//  - modelopt-nvfp4: NVFP4 weights as they are (codes, block scales, tensor scale), dense weights in their dtype:
//    lossless for any model with NVFP4 weights;
//  - compressed-tensors-nvfp4: the same, with each tensor scale stored as a reciprocal (io/compressed_tensors.h):
//    lossless unless a tensor scale is no float's reciprocal (about one in eight of arbitrary floats), which then
//    reads back one float32 ulp away (scales_moved_by_copy counts them);
//  - dat: the same, lossless when every NVFP4 weight has tensor scale 1 (the format stores none), which is true of
//    every `.dat` model and of `quantize --format dat` output;
//  - hf-safetensors: every weight dense BF16, NVFP4 weights dequantized first (exact when code x block scale x
//    tensor scale fits BF16's 8 significant bits, as it does for tensor scale 1; rounded otherwise).
// Unlike `quantize`, nothing is requantized: where a format cannot hold a weight exactly, copy_obstacle says why
// and write_model_copy refuses.
#pragma once

#include <string>

#include "core/files.h"
#include "io/model_files.h"

namespace nvfp4lm {

// Why `source` cannot be written to `format` as it is, in words ("" when it can).
std::string copy_obstacle(const ModelFiles& source, ModelFormat format);

// How many NVFP4 weights of `source` would read back from a copy in `format` with a different tensor scale (only
// compressed-tensors can move one, by one ulp).
size_t scales_moved_by_copy(const ModelFiles& source, ModelFormat format);

// Writes `source` to the directory `out` in `format` (with config.json, generation_config.json and the tokenizer
// files). Error naming copy_obstacle when it is not empty, or when `out` exists.
void write_model_copy(const ModelFiles& source, const fs::path& out, ModelFormat format);

}  // namespace nvfp4lm
