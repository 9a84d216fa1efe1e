// Qwen3 model configuration as Hugging Face writes it in config.json, with the checks that decide whether we
// can run a model at all. Parsing accepts model_type "qwen3" (or architectures containing
// "Qwen3ForCausalLM"); every other architecture, and Qwen3 variants we do not implement (attention biases,
// sliding-window attention, rope_scaling other than the default, activations other than silu), is an Error
// that says what was found. Required fields missing or of the wrong JSON type are Errors naming the file and
// the field; optional fields take Hugging Face's defaults (head_dim: hidden_size / num_attention_heads).
// to_json writes the HF form back (keys sorted, as transformers does).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/files.h"

namespace nvfp4lm {

struct Qwen3Config {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  int64_t max_position_embeddings = 32768;
  bool tie_word_embeddings = false;
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // config.json's eos_token_id, an int or a list
  std::string torch_dtype;             // "bfloat16", "float16", "float32"; empty when the file does not say

  int64_t q_dim() const { return num_attention_heads * head_dim; }
  int64_t kv_dim() const { return num_key_value_heads * head_dim; }
  int64_t kv_groups() const { return num_attention_heads / num_key_value_heads; }  // q heads per kv head

  // Parameter counts (elements).
  int64_t embedding_parameters() const { return vocab_size * hidden_size; }
  int64_t attention_parameters_per_layer() const { return 2 * hidden_size * q_dim() + 2 * hidden_size * kv_dim(); }
  int64_t mlp_parameters_per_layer() const { return 3 * hidden_size * intermediate_size; }
  int64_t norm_parameters_per_layer() const { return 2 * hidden_size + 2 * head_dim; }  // in/post norms, q/k norms
  int64_t lm_head_parameters() const { return tie_word_embeddings ? 0 : vocab_size * hidden_size; }
  int64_t total_parameters() const;

  // Throws Error (prefixed by `where`) when a value is out of range: non-positive sizes, heads not divisible by
  // kv heads, odd head_dim (RoPE rotates pairs), absurd sizes, non-finite eps/theta.
  void validate(const std::string& where) const;
  bool operator==(const Qwen3Config& other) const = default;
};

// Parses a config.json object; `where` (the file) prefixes every message.
Qwen3Config parse_qwen3_config(const nlohmann::json& config, const std::string& where);
// Reads and parses a config.json file.
Qwen3Config load_qwen3_config(const fs::path& path);
// The HF config.json form (architectures, model_type, every field transformers writes for Qwen3).
nlohmann::json qwen3_config_to_json(const Qwen3Config& config);

// generation_config.json: the fields we use.
struct GenerationConfig {
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // int or list in the file
  std::optional<int64_t> pad_token_id;
};
GenerationConfig load_generation_config(const fs::path& path);
// generation_config.json for a config (bos, eos, pad = bos when known).
nlohmann::json generation_config_to_json(const Qwen3Config& config);

// Built-in shapes: "tiny" (tests), "small" (~100M parameters, CPU benchmarks), "qwen3-4b" (exactly
// Qwen3-4B-Instruct-2507). Error lists the names for anything else.
Qwen3Config qwen3_preset(std::string_view name);
std::vector<std::string> qwen3_preset_names();

}  // namespace nvfp4lm
