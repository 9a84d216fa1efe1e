// See gguf_qwen3.h.
#include "io/gguf_qwen3.h"

#include <array>
#include <utility>
#include <vector>

#include "core/error.h"
#include "io/weight_names.h"

namespace nvfp4lm {
namespace {

constexpr std::string_view kArch = "qwen3";

// blk.N.<name> of each layer weight (io/weight_names.h LayerWeight), in its order.
constexpr std::array<std::string_view, kLayerWeightCount> kLayerNames = {
    "attn_norm.weight",   "attn_q.weight",      "attn_k.weight",      "attn_v.weight",
    "attn_output.weight", "attn_q_norm.weight", "attn_k_norm.weight", "ffn_norm.weight",
    "ffn_gate.weight",    "ffn_up.weight",      "ffn_down.weight",
};

std::string key(std::string_view suffix) { return fmt::format("{}.{}", kArch, suffix); }

uint32_t u32(int64_t value, std::string_view what) {
  NVFP4LM_CHECK(value >= 0 && value <= static_cast<int64_t>(UINT32_MAX), "GGUF {}: {} does not fit a u32", what, value);
  return static_cast<uint32_t>(value);
}

bool looks_special(std::string_view text) {
  return text.size() >= 4 && text.substr(0, 2) == "<|" && text.substr(text.size() - 2) == "|>";
}

}  // namespace

std::string gguf_tensor_name(std::string_view hf_name) {
  if (hf_name == kEmbeddingWeightName) return "token_embd.weight";
  if (hf_name == kFinalNormWeightName) return "output_norm.weight";
  if (hf_name == kLmHeadWeightName) return "output.weight";
  if (const auto parsed = parse_layer_weight_name(hf_name))
    return fmt::format("blk.{}.{}", parsed->layer, kLayerNames[static_cast<size_t>(parsed->weight)]);
  NVFP4LM_FAIL("weight '{}' has no place in llama.cpp's qwen3 architecture, so it cannot be written to GGUF", hf_name);
}

void add_qwen3_gguf_metadata(GgufWriter& writer, const Qwen3Config& config, std::string_view model_name,
                             gguf::GgmlType file_type) {
  writer.add_string("general.architecture", kArch);
  writer.add_string("general.name", model_name);
  writer.add_u32("general.file_type", gguf::llama_file_type(file_type));
  writer.add_u32("general.quantization_version", 2);
  writer.add_u32(key("context_length"), u32(config.max_position_embeddings, "context_length"));
  writer.add_u32(key("embedding_length"), u32(config.hidden_size, "embedding_length"));
  writer.add_u32(key("block_count"), u32(config.num_hidden_layers, "block_count"));
  writer.add_u32(key("feed_forward_length"), u32(config.intermediate_size, "feed_forward_length"));
  writer.add_u32(key("attention.head_count"), u32(config.num_attention_heads, "head_count"));
  writer.add_u32(key("attention.head_count_kv"), u32(config.num_key_value_heads, "head_count_kv"));
  writer.add_u32(key("attention.key_length"), u32(config.head_dim, "key_length"));
  writer.add_u32(key("attention.value_length"), u32(config.head_dim, "value_length"));
  writer.add_f32(key("rope.freq_base"), static_cast<float>(config.rope_theta));
  writer.add_f32(key("attention.layer_norm_rms_epsilon"), static_cast<float>(config.rms_norm_eps));
}

void add_tokenizer_gguf_metadata(GgufWriter& writer, const Tokenizer& tokenizer, const Qwen3Config& config) {
  check_tokenizer_fits_model(tokenizer, config.vocab_size, "being written as GGUF");
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  tokens.reserve(static_cast<size_t>(config.vocab_size));
  types.reserve(static_cast<size_t>(config.vocab_size));
  for (int64_t id = 0; id < config.vocab_size; ++id) {
    const auto i = static_cast<int32_t>(id);
    if (!tokenizer.is_used(i)) {
      tokens.push_back(fmt::format("[PAD{}]", id));
      types.push_back(static_cast<int32_t>(gguf::TokenType::Unused));
      continue;
    }
    tokens.emplace_back(tokenizer.token_text(i));
    gguf::TokenType type = gguf::TokenType::Normal;
    if (tokenizer.is_added(i))
      type = tokenizer.is_special(i) || looks_special(tokens.back()) ? gguf::TokenType::Control
                                                                     : gguf::TokenType::UserDefined;
    types.push_back(static_cast<int32_t>(type));
  }
  std::vector<std::string> merges;
  merges.reserve(tokenizer.merge_count());
  for (size_t rank = 0; rank < tokenizer.merge_count(); ++rank) {
    const auto [left, right] = tokenizer.merge(rank);
    merges.push_back(fmt::format("{} {}", tokenizer.token_text(left), tokenizer.token_text(right)));
  }
  writer.add_string("tokenizer.ggml.model", "gpt2");
  writer.add_string("tokenizer.ggml.pre", "qwen2");
  writer.add_string_array("tokenizer.ggml.tokens", tokens);
  writer.add_i32_array("tokenizer.ggml.token_type", types);
  writer.add_string_array("tokenizer.ggml.merges", merges);
  const SpecialTokenIds& special = tokenizer.special_ids();
  int64_t eos = special.eos >= 0 ? special.eos : -1;
  if (eos < 0 && !config.eos_token_ids.empty()) eos = config.eos_token_ids.front();
  if (eos >= 0) writer.add_u32("tokenizer.ggml.eos_token_id", u32(eos, "eos_token_id"));
  if (special.pad >= 0) writer.add_u32("tokenizer.ggml.padding_token_id", u32(special.pad, "padding_token_id"));
  const int64_t bos = config.bos_token_id.value_or(special.endoftext);
  if (bos >= 0) writer.add_u32("tokenizer.ggml.bos_token_id", u32(bos, "bos_token_id"));
  writer.add_bool("tokenizer.ggml.add_bos_token", false);  // Qwen prompts start without one
  if (!tokenizer.chat_template_source().empty())
    writer.add_string("tokenizer.chat_template", tokenizer.chat_template_source());
}

}  // namespace nvfp4lm
