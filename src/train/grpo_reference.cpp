// See grpo_reference.h.
#include "train/grpo_reference.h"

#include <cmath>

#include "core/error.h"

namespace nvfp4lm {
namespace {

Tensor copy_of(const Tensor& t) { return t.defined() ? t.clone() : Tensor(); }

LinearWeight copy_of(const LinearWeight& w) {
  LinearWeight copy = w;
  copy.dense = copy_of(w.dense);
  copy.nvfp4.codes = copy_of(w.nvfp4.codes);
  copy.nvfp4.block_scales = copy_of(w.nvfp4.block_scales);
  return copy;
}

bool same_storage(const Tensor& a, const Tensor& b) { return a.defined() && b.defined() && a.storage() == b.storage(); }

}  // namespace

Qwen3Model frozen_reference(const Qwen3Trainable& model) {
  Qwen3Model policy = model.inference_model();
  if (model.options().lora.enabled()) return policy;  // its base rows: see the top
  const Qwen3Weights& from = policy.weights();
  Qwen3Weights weights;
  weights.embed_tokens = copy_of(from.embed_tokens);
  for (const Qwen3LayerWeights& layer : from.layers) {
    Qwen3LayerWeights& to = weights.layers.emplace_back();
    to.input_norm = copy_of(layer.input_norm);
    to.post_attention_norm = copy_of(layer.post_attention_norm);
    to.q_norm = copy_of(layer.q_norm);
    to.k_norm = copy_of(layer.k_norm);
    const auto source = layer.linears();
    const auto target = to.linears();
    for (size_t i = 0; i < source.size(); ++i) *target[i] = copy_of(*source[i]);
  }
  weights.final_norm = copy_of(from.final_norm);
  weights.lm_head = copy_of(from.lm_head);
  if (same_storage(from.lm_head.dense, from.embed_tokens))
    weights.lm_head.dense = weights.embed_tokens;  // tied: one copy, as in the policy
  return Qwen3Model(model.config(), std::move(weights));
}

std::vector<float> reference_token_logps(const Qwen3Model& reference,
                                         const std::vector<const std::vector<int32_t>*>& prompts,
                                         const std::vector<const Completion*>& completions, int64_t width) {
  NVFP4LM_ASSERT(prompts.size() == completions.size(), "{} prompts, {} completions", prompts.size(),
                 completions.size());
  std::vector<float> logps(completions.size() * static_cast<size_t>(width), 0.0f);
  for (size_t r = 0; r < completions.size(); ++r) {
    const std::vector<int32_t>& prompt = *prompts[r];
    const std::vector<int32_t>& answer = completions[r]->tokens;
    if (answer.empty()) continue;
    const auto length = static_cast<int64_t>(prompt.size() + answer.size());
    NVFP4LM_ASSERT(!prompt.empty() && length <= width, "row {}: {} tokens in a batch {} wide", r, length, width);
    std::vector<int32_t> ids(prompt);
    ids.insert(ids.end(), answer.begin(), answer.end());
    const auto scored = static_cast<int64_t>(answer.size());
    // Positions prompt - 1 .. length - 2 predict the completion's tokens: the last scored + 1 positions' logits, less
    // the very last (it predicts nothing here).
    const Tensor logits =
        reference.forward_last(Tensor::from_ints(ids, Shape{1, length}), scored + 1).to(Device::cpu()).contiguous();
    const int64_t vocab = logits.dim(2);
    for (int64_t k = 0; k < scored; ++k) {
      const float* row = logits.data<float>() + k * vocab;
      double max_logit = row[0];
      for (int64_t v = 1; v < vocab; ++v) max_logit = std::max<double>(max_logit, row[v]);
      double sum = 0;
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - max_logit);
      const double logp = static_cast<double>(row[answer[static_cast<size_t>(k)]]) - max_logit - std::log(sum);
      logps[r * static_cast<size_t>(width) + prompt.size() + static_cast<size_t>(k) - 1] = static_cast<float>(logp);
    }
  }
  return logps;
}

}  // namespace nvfp4lm
