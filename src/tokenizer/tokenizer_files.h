// Finding a model's tokenizer files. A model is given as an HF directory, a ModelOpt directory or a
// `.dat` / `.safetensors` file; the tokenizer lives in that directory or beside that file.
#pragma once

#include <filesystem>

namespace nvfp4lm {

struct TokenizerFiles {
  std::filesystem::path tokenizer_json;         // always set
  std::filesystem::path tokenizer_config_json;  // empty when the model has none (eos/pad/template unknown)
  std::filesystem::path chat_template_jinja;    // chat_template.jinja beside it (transformers' newer layout), or empty
};

// `path` may be: a directory holding tokenizer.json (HF, ModelOpt or a tokenizer-only directory); a file
// (a .dat, a .safetensors, or tokenizer.json itself), whose directory is searched. tokenizer_config.json
// is looked for beside tokenizer.json. Throws Error listing every place looked at when tokenizer.json is
// not found, with the fix (--tokenizer DIR; the bundled Qwen3 tokenizer is models/qwen3-tokenizer).
TokenizerFiles find_tokenizer_files(const std::filesystem::path& path);

// The tokenizer shipped in this repository (models/qwen3-tokenizer under the source tree).
std::filesystem::path bundled_qwen3_tokenizer_dir();

}  // namespace nvfp4lm
