// Internal to io/: what open_model() found, handed to the format-specific readers
// (model_files_safetensors.cpp, model_files_dat.cpp, model_files_gguf.cpp).
#pragma once

#include <memory>
#include <optional>

#include "io/model_files.h"

namespace nvfp4lm::detail {

struct ModelLocation {
  ModelFormat format = ModelFormat::HfSafetensors;
  fs::path path;         // what the user named
  fs::path directory;    // model directory (or the .dat file's directory)
  fs::path config_path;  // config.json
  fs::path dat_path;     // the .dat file (Dat only)
  std::optional<fs::path> tokenizer_dir;
};

// Base-class state from a location: reads and parses config.json.
class ModelFilesBase : public ModelFiles {
 protected:
  explicit ModelFilesBase(const ModelLocation& location);
};

std::unique_ptr<ModelFiles> open_safetensors_model(const ModelLocation& location);
std::unique_ptr<ModelFiles> open_dat_model(const ModelLocation& location);
std::unique_ptr<ModelFiles> open_gguf_model(const ModelLocation& location);  // model_files_gguf.cpp

}  // namespace nvfp4lm::detail
