// See stop_conditions.h. The filter keeps the invariant that no stop string starts inside text already
// returned: after each push, the held tail is the longest suffix that is a proper prefix of some stop string.
#include "infer/stop_conditions.h"

#include <algorithm>

#include "core/error.h"

namespace nvfp4lm {

std::vector<int32_t> end_of_sequence_ids(const Qwen3Config& config, const std::optional<GenerationConfig>& generation,
                                         const Tokenizer& tokenizer, int64_t vocab_size) {
  std::vector<int64_t> candidates(config.eos_token_ids.begin(), config.eos_token_ids.end());
  if (generation)
    candidates.insert(candidates.end(), generation->eos_token_ids.begin(), generation->eos_token_ids.end());
  const SpecialTokenIds& special = tokenizer.special_ids();
  for (int32_t id : {special.im_end, special.endoftext, special.eos}) candidates.push_back(id);
  std::vector<int32_t> ids;
  for (int64_t id : candidates)
    if (id >= 0 && id < vocab_size) ids.push_back(static_cast<int32_t>(id));
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

std::optional<GenerationConfig> find_generation_config(const fs::path& model_path) {
  const fs::path dir = fs::is_directory(model_path) ? model_path : model_path.parent_path();
  const fs::path file = dir / "generation_config.json";
  if (!fs::is_regular_file(file)) return std::nullopt;
  return load_generation_config(file);
}

StopStringFilter::StopStringFilter(std::vector<std::string> stop_strings) : stop_strings_(std::move(stop_strings)) {
  for (const auto& stop : stop_strings_) NVFP4LM_CHECK(!stop.empty(), "--stop: a stop string must not be empty");
}

std::string StopStringFilter::push(std::string_view piece) {
  if (stopped_) return {};
  held_.append(piece);
  if (stop_strings_.empty()) return std::exchange(held_, std::string());

  // The earliest complete stop string wins (the longest one on a tie at the same position).
  size_t stop_at = std::string::npos;
  for (const auto& stop : stop_strings_) {
    const size_t at = held_.find(stop);
    if (at == std::string::npos) continue;
    if (at < stop_at || (at == stop_at && stop.size() > matched_.size())) {
      stop_at = at;
      matched_ = stop;
    }
  }
  if (stop_at != std::string::npos) {
    stopped_ = true;
    std::string shown = held_.substr(0, stop_at);
    held_.clear();
    return shown;
  }

  // Hold back the longest suffix that is a proper prefix of a stop string.
  size_t hold = 0;
  for (const auto& stop : stop_strings_) {
    for (size_t length = std::min(held_.size(), stop.size() - 1); length > hold; --length) {
      if (held_.compare(held_.size() - length, length, stop, 0, length) == 0) {
        hold = length;
        break;
      }
    }
  }
  std::string shown = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return shown;
}

std::string StopStringFilter::flush() {
  if (stopped_) return {};
  return std::exchange(held_, std::string());
}

}  // namespace nvfp4lm
