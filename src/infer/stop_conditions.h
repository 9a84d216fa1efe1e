// When generation ends, besides the token budget:
//  - end-of-sequence tokens: the union of config.json's eos_token_id, generation_config.json's eos_token_id and
//    the tokenizer's <|im_end|>, <|endoftext|> and eos_token (a Qwen3 model ends a turn with <|im_end|> and a
//    document with <|endoftext|>, and configs list only one of them). The EOS token itself is never shown.
//  - user stop strings, matched on the decoded text (so a stop string may span tokens). Text is shown as it
//    comes except for a tail that could still become a stop string, which is held back until the next piece
//    decides it; the stop string itself and everything after it are never shown (as llama.cpp's server and
//    HF's stop_strings do).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/files.h"
#include "io/hf_config.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm {

// Sorted, unique ids; ids outside [0, vocab_size) are dropped (a config may name a token the model lacks).
std::vector<int32_t> end_of_sequence_ids(const Qwen3Config& config, const std::optional<GenerationConfig>& generation,
                                         const Tokenizer& tokenizer, int64_t vocab_size);

// generation_config.json in `model_dir` (or beside a model file), when there is one.
std::optional<GenerationConfig> find_generation_config(const fs::path& model_path);

class StopStringFilter {
 public:
  // Empty stop strings are an Error (they would stop at once).
  explicit StopStringFilter(std::vector<std::string> stop_strings);

  // Adds the next decoded piece; returns the text that can be shown now. Once a stop string is complete,
  // stopped() turns true, the text before it is returned and everything else is dropped.
  std::string push(std::string_view piece);
  // Generation ended without a stop string: returns the text held back.
  std::string flush();

  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }  // the stop string found, when stopped()
  size_t held_bytes() const { return held_.size(); }

 private:
  std::vector<std::string> stop_strings_;
  std::string held_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace nvfp4lm
