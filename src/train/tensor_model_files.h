// A model whose weights are tensors already in memory (a checkpoint's master weights, say), behind the ModelFiles
// interface every loader takes (io/model_files.h): export --calibrate runs the exported forward on them without
// writing a model directory first. Weights must be dense F32/BF16/F16 CPU tensors under their Hugging Face names;
// the config is the model's config.json. load() returns the tensor itself (no copy; read-only use).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "io/model_files.h"
#include "model/parameter.h"

namespace nvfp4lm {

// `name` stands in for a path in messages ("checkpoint runs/a/step-40"). Error when a weight the config needs is
// missing or misshapen, or a tensor is not a dense float CPU tensor.
std::unique_ptr<ModelFiles> tensor_model_files(const nlohmann::json& config_json, std::span<const NamedTensor> weights,
                                               const std::string& name);

}  // namespace nvfp4lm
