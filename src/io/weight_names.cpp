#include "io/weight_names.h"

#include <cctype>

namespace nvfp4lm {
namespace {

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// "model.layers.<N>.<rest>" -> rest, or nullopt.
std::optional<std::string_view> layer_suffix(std::string_view name) {
  constexpr std::string_view prefix = "model.layers.";
  if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
  name.remove_prefix(prefix.size());
  size_t digits = 0;
  while (digits < name.size() && std::isdigit(static_cast<unsigned char>(name[digits]))) ++digits;
  if (digits == 0 || digits >= name.size() || name[digits] != '.') return std::nullopt;
  return name.substr(digits + 1);
}

}  // namespace

std::string_view weight_kind_name(WeightKind kind) {
  switch (kind) {
    case WeightKind::Embedding:
      return "embedding";
    case WeightKind::AttentionProjection:
      return "attention";
    case WeightKind::MlpProjection:
      return "mlp";
    case WeightKind::QkNorm:
      return "qk_norm";
    case WeightKind::LayerNorm:
      return "layer_norm";
    case WeightKind::FinalNorm:
      return "final_norm";
    case WeightKind::LmHead:
      return "lm_head";
  }
  return "?";
}

std::vector<ExpectedWeight> qwen3_expected_weights(const Qwen3Config& c) {
  std::vector<ExpectedWeight> weights;
  weights.push_back({"model.embed_tokens.weight", Shape{c.vocab_size, c.hidden_size}, WeightKind::Embedding, -1});
  for (int layer = 0; layer < static_cast<int>(c.num_hidden_layers); ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    auto add = [&](const std::string& suffix, Shape shape, WeightKind kind) {
      weights.push_back({p + suffix, shape, kind, layer});
    };
    add("input_layernorm.weight", Shape{c.hidden_size}, WeightKind::LayerNorm);
    add("self_attn.q_proj.weight", Shape{c.q_dim(), c.hidden_size}, WeightKind::AttentionProjection);
    add("self_attn.k_proj.weight", Shape{c.kv_dim(), c.hidden_size}, WeightKind::AttentionProjection);
    add("self_attn.v_proj.weight", Shape{c.kv_dim(), c.hidden_size}, WeightKind::AttentionProjection);
    add("self_attn.o_proj.weight", Shape{c.hidden_size, c.q_dim()}, WeightKind::AttentionProjection);
    add("self_attn.q_norm.weight", Shape{c.head_dim}, WeightKind::QkNorm);
    add("self_attn.k_norm.weight", Shape{c.head_dim}, WeightKind::QkNorm);
    add("post_attention_layernorm.weight", Shape{c.hidden_size}, WeightKind::LayerNorm);
    add("mlp.gate_proj.weight", Shape{c.intermediate_size, c.hidden_size}, WeightKind::MlpProjection);
    add("mlp.up_proj.weight", Shape{c.intermediate_size, c.hidden_size}, WeightKind::MlpProjection);
    add("mlp.down_proj.weight", Shape{c.hidden_size, c.intermediate_size}, WeightKind::MlpProjection);
  }
  weights.push_back({"model.norm.weight", Shape{c.hidden_size}, WeightKind::FinalNorm, -1});
  if (!c.tie_word_embeddings)
    weights.push_back({"lm_head.weight", Shape{c.vocab_size, c.hidden_size}, WeightKind::LmHead, -1});
  return weights;
}

std::optional<WeightKind> classify_weight_name(std::string_view name) {
  if (name == "model.embed_tokens.weight") return WeightKind::Embedding;
  if (name == "model.norm.weight") return WeightKind::FinalNorm;
  if (name == "lm_head.weight") return WeightKind::LmHead;
  const auto rest = layer_suffix(name);
  if (!rest) return std::nullopt;
  for (std::string_view s :
       {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight"})
    if (*rest == s) return WeightKind::AttentionProjection;
  for (std::string_view s : {"mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"})
    if (*rest == s) return WeightKind::MlpProjection;
  if (*rest == "self_attn.q_norm.weight" || *rest == "self_attn.k_norm.weight") return WeightKind::QkNorm;
  if (*rest == "input_layernorm.weight" || *rest == "post_attention_layernorm.weight") return WeightKind::LayerNorm;
  return std::nullopt;
}

bool is_nvfp4_projection(WeightKind kind) {
  return kind == WeightKind::AttentionProjection || kind == WeightKind::MlpProjection;
}

std::string fused_scale_group(const std::string& name) {
  if (!layer_suffix(name)) return name;
  for (std::string_view s : {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"})
    if (ends_with(name, s)) return name.substr(0, name.size() - s.size()) + "self_attn.qkv";
  for (std::string_view s : {"mlp.gate_proj.weight", "mlp.up_proj.weight"})
    if (ends_with(name, s)) return name.substr(0, name.size() - s.size()) + "mlp.gate_up";
  return name;
}

}  // namespace nvfp4lm
