// The weights of a Qwen3 model by their Hugging Face names and shapes ([out, in] for linear layers), in one
// canonical order (embedding, then per layer: input norm, q/k/v/o, q/k norms, post-attention norm,
// gate/up/down, then the final norm and, when untied, lm_head). Every file format is mapped onto these names, and
// every other file names a weight through this header (the constants and layer_weight_name), never by a literal.
// Also the NVFP4 policy (which weights are quantized: the seven projections, lm_head on request) and the
// groups that inference engines fuse into one GEMM and that therefore share one tensor scale.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/shape.h"
#include "io/hf_config.h"

namespace nvfp4lm {

inline constexpr std::string_view kEmbeddingWeightName = "model.embed_tokens.weight";
inline constexpr std::string_view kFinalNormWeightName = "model.norm.weight";
inline constexpr std::string_view kLmHeadWeightName = "lm_head.weight";

// The weights of a decoder layer, "model.layers.<N>.<suffix>", in canonical order.
enum class LayerWeight {
  InputNorm,          // input_layernorm.weight
  QProj,              // self_attn.q_proj.weight
  KProj,              // self_attn.k_proj.weight
  VProj,              // self_attn.v_proj.weight
  OProj,              // self_attn.o_proj.weight
  QNorm,              // self_attn.q_norm.weight
  KNorm,              // self_attn.k_norm.weight
  PostAttentionNorm,  // post_attention_layernorm.weight
  GateProj,           // mlp.gate_proj.weight
  UpProj,             // mlp.up_proj.weight
  DownProj,           // mlp.down_proj.weight
};
inline constexpr int kLayerWeightCount = 11;
std::string_view layer_weight_suffix(LayerWeight weight);          // "self_attn.q_proj.weight"
std::string layer_weight_name(int64_t layer, LayerWeight weight);  // "model.layers.3.self_attn.q_proj.weight"

struct LayerWeightName {
  int64_t layer = 0;
  LayerWeight weight = LayerWeight::InputNorm;
};
// "model.layers.<N>.<suffix>" of a layer weight -> its layer and weight; nullopt for any other name.
std::optional<LayerWeightName> parse_layer_weight_name(std::string_view name);

enum class WeightKind { Embedding, AttentionProjection, MlpProjection, QkNorm, LayerNorm, FinalNorm, LmHead };
std::string_view weight_kind_name(WeightKind kind);  // "embedding", "attention", "mlp", "qk_norm", ...

struct ExpectedWeight {
  std::string name;
  Shape shape;
  WeightKind kind = WeightKind::Embedding;
  int layer = -1;  // -1 outside the decoder layers
};

// Every weight the config needs, canonical order. lm_head.weight only when tie_word_embeddings is false.
std::vector<ExpectedWeight> qwen3_expected_weights(const Qwen3Config& config);

// The kind of a Qwen3 weight name (any layer index), or nullopt for names that are not part of Qwen3.
std::optional<WeightKind> classify_weight_name(std::string_view name);

// Weights quantized to NVFP4 by default (the projections); lm_head is quantized only on request.
bool is_nvfp4_projection(WeightKind kind);

// Weights whose tensor scale must be shared because engines fuse them: q/k/v of a layer ("...self_attn.qkv")
// and gate/up ("...mlp.gate_up"); every other name is its own group (the name itself).
std::string fused_scale_group(const std::string& name);

}  // namespace nvfp4lm
