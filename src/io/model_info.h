// What `nvfp4lm info` reports about a model: format, architecture and config summary, every weight (name, kind,
// storage, logical shape, bytes in the file, NVFP4 or not), parameter counts (total, embedding, per kind, NVFP4 vs
// dense) and byte totals. With checksums, also every raw tensor of every data file with the sum and the sum of
// absolute values of its decoded elements (in double; packed FP4 bytes are summed as integers, E4M3 decoded),
// which tests/reference/check_safetensors_load.py compares against what PyTorch's safetensors loader reads.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "io/model_files.h"

namespace nvfp4lm {

struct ModelInfoOptions {
  bool checksums = false;  // reads every byte of the model
};

nlohmann::ordered_json model_info_json(const ModelFiles& model, const ModelInfoOptions& options = {});
// Human-readable rendering of model_info_json's result.
std::string model_info_text(const nlohmann::ordered_json& info);

}  // namespace nvfp4lm
