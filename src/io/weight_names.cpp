#include "io/weight_names.h"

#include <array>
#include <charconv>
#include <utility>

namespace nvfp4lm {
namespace {

// Suffix and kind of each LayerWeight, in its order.
constexpr std::array<std::pair<std::string_view, WeightKind>, kLayerWeightCount> kLayerWeights = {{
    {"input_layernorm.weight", WeightKind::LayerNorm},
    {"self_attn.q_proj.weight", WeightKind::AttentionProjection},
    {"self_attn.k_proj.weight", WeightKind::AttentionProjection},
    {"self_attn.v_proj.weight", WeightKind::AttentionProjection},
    {"self_attn.o_proj.weight", WeightKind::AttentionProjection},
    {"self_attn.q_norm.weight", WeightKind::QkNorm},
    {"self_attn.k_norm.weight", WeightKind::QkNorm},
    {"post_attention_layernorm.weight", WeightKind::LayerNorm},
    {"mlp.gate_proj.weight", WeightKind::MlpProjection},
    {"mlp.up_proj.weight", WeightKind::MlpProjection},
    {"mlp.down_proj.weight", WeightKind::MlpProjection},
}};

constexpr std::string_view kLayerPrefix = "model.layers.";

}  // namespace

std::string_view layer_weight_suffix(LayerWeight weight) { return kLayerWeights[static_cast<size_t>(weight)].first; }

std::string layer_weight_name(int64_t layer, LayerWeight weight) {
  return std::string(kLayerPrefix) + std::to_string(layer) + "." + std::string(layer_weight_suffix(weight));
}

std::optional<LayerWeightName> parse_layer_weight_name(std::string_view name) {
  if (name.substr(0, kLayerPrefix.size()) != kLayerPrefix) return std::nullopt;
  name.remove_prefix(kLayerPrefix.size());
  int64_t layer = -1;
  const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), layer);
  if (error != std::errc() || layer < 0 || end == name.data() + name.size() || *end != '.') return std::nullopt;
  const std::string_view suffix(end + 1, static_cast<size_t>(name.data() + name.size() - end - 1));
  for (size_t i = 0; i < kLayerWeights.size(); ++i)
    if (suffix == kLayerWeights[i].first) return LayerWeightName{layer, static_cast<LayerWeight>(i)};
  return std::nullopt;
}

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
  weights.push_back({std::string(kEmbeddingWeightName), Shape{c.vocab_size, c.hidden_size}, WeightKind::Embedding, -1});
  for (int layer = 0; layer < static_cast<int>(c.num_hidden_layers); ++layer) {
    auto add = [&](LayerWeight weight, Shape shape) {
      weights.push_back(
          {layer_weight_name(layer, weight), shape, kLayerWeights[static_cast<size_t>(weight)].second, layer});
    };
    add(LayerWeight::InputNorm, Shape{c.hidden_size});
    add(LayerWeight::QProj, Shape{c.q_dim(), c.hidden_size});
    add(LayerWeight::KProj, Shape{c.kv_dim(), c.hidden_size});
    add(LayerWeight::VProj, Shape{c.kv_dim(), c.hidden_size});
    add(LayerWeight::OProj, Shape{c.hidden_size, c.q_dim()});
    add(LayerWeight::QNorm, Shape{c.head_dim});
    add(LayerWeight::KNorm, Shape{c.head_dim});
    add(LayerWeight::PostAttentionNorm, Shape{c.hidden_size});
    add(LayerWeight::GateProj, Shape{c.intermediate_size, c.hidden_size});
    add(LayerWeight::UpProj, Shape{c.intermediate_size, c.hidden_size});
    add(LayerWeight::DownProj, Shape{c.hidden_size, c.intermediate_size});
  }
  weights.push_back({std::string(kFinalNormWeightName), Shape{c.hidden_size}, WeightKind::FinalNorm, -1});
  if (!c.tie_word_embeddings)
    weights.push_back({std::string(kLmHeadWeightName), Shape{c.vocab_size, c.hidden_size}, WeightKind::LmHead, -1});
  return weights;
}

std::optional<WeightKind> classify_weight_name(std::string_view name) {
  if (name == kEmbeddingWeightName) return WeightKind::Embedding;
  if (name == kFinalNormWeightName) return WeightKind::FinalNorm;
  if (name == kLmHeadWeightName) return WeightKind::LmHead;
  const auto parsed = parse_layer_weight_name(name);
  if (!parsed) return std::nullopt;
  return kLayerWeights[static_cast<size_t>(parsed->weight)].second;
}

bool is_nvfp4_projection(WeightKind kind) {
  return kind == WeightKind::AttentionProjection || kind == WeightKind::MlpProjection;
}

std::string fused_scale_group(const std::string& name) {
  const auto parsed = parse_layer_weight_name(name);
  if (!parsed) return name;
  const std::string prefix = name.substr(0, name.size() - layer_weight_suffix(parsed->weight).size());
  switch (parsed->weight) {
    case LayerWeight::QProj:
    case LayerWeight::KProj:
    case LayerWeight::VProj:
      return prefix + "self_attn.qkv";
    case LayerWeight::GateProj:
    case LayerWeight::UpProj:
      return prefix + "mlp.gate_up";
    default:
      return name;
  }
}

}  // namespace nvfp4lm
