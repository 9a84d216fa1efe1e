// See tokenizer_files.h. Only existence is checked here; parsing errors come from the loader.
#include "tokenizer/tokenizer_files.h"

#include <string>
#include <vector>

#include "core/error.h"

namespace nvfp4lm {

TokenizerFiles find_tokenizer_files(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  NVFP4LM_CHECK(fs::exists(path, ec), "model path {} does not exist", path.string());
  std::vector<fs::path> candidates;
  if (fs::is_directory(path, ec)) {
    candidates.push_back(path / "tokenizer.json");
  } else if (path.filename() == "tokenizer.json") {
    candidates.push_back(path);
  } else {
    fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
    candidates.push_back(dir / "tokenizer.json");
  }
  for (const fs::path& candidate : candidates) {
    if (!fs::is_regular_file(candidate, ec)) continue;
    TokenizerFiles files;
    files.tokenizer_json = candidate;
    fs::path config = candidate.parent_path() / "tokenizer_config.json";
    if (fs::is_regular_file(config, ec)) files.tokenizer_config_json = config;
    const fs::path chat_template = candidate.parent_path() / "chat_template.jinja";
    if (fs::is_regular_file(chat_template, ec)) files.chat_template_jinja = chat_template;
    return files;
  }
  std::string looked;
  for (const fs::path& candidate : candidates) looked += (looked.empty() ? "" : ", ") + candidate.string();
  NVFP4LM_FAIL(
      "no tokenizer.json for model {}: looked at {}. Put the model's tokenizer.json and tokenizer_config.json "
      "there, or pass --tokenizer DIR (the Qwen3 tokenizer is bundled in {})",
      path.string(), looked, bundled_qwen3_tokenizer_dir().string());
}

std::filesystem::path bundled_qwen3_tokenizer_dir() {
  return std::filesystem::path(NVFP4LM_SOURCE_DIR) / "models" / "qwen3-tokenizer";
}

}  // namespace nvfp4lm
