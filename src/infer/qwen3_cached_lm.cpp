// See qwen3_cached_lm.h.
#include "infer/qwen3_cached_lm.h"

#include <fmt/format.h>

#include <vector>

#include "core/error.h"
#include "infer/generator.h"
#include "infer/stop_conditions.h"
#include "tokenizer/chat.h"

namespace nvfp4lm {

Qwen3CachedLm::Qwen3CachedLm(const Qwen3Model& model, int64_t max_tokens, std::string capacity_note,
                             std::optional<DecodeMode> decode, int adapter)
    : model_(model),
      adapter_(adapter),
      cache_(model.make_cache(1, max_tokens)),
      capacity_note_(std::move(capacity_note)) {
  if (decode) decode_step_ = std::make_unique<Qwen3DecodeStep>(model_, cache_, *decode);
}

std::string Qwen3CachedLm::decode_path() const {
  return decode_step_ ? decode_step_->describe() : std::string("forward_cached");
}

std::string Qwen3CachedLm::capacity_note() const {
  if (!capacity_note_.empty()) return capacity_note_;
  return fmt::format("the KV cache of {} tokens", cache_.max_tokens());
}

Tensor Qwen3CachedLm::device_logits(std::span<const int32_t> ids, FedTokens fed) {
  NVFP4LM_ASSERT(cache_.length() == length(), "KV cache holds {} tokens, expected {}", cache_.length(), length());
  const bool generated = fed == FedTokens::Generated;
  if (decode_step_ && generated && ids.size() == 1) return decode_step_->run(ids, adapter_);
  const Tensor batch =
      Tensor::from_ints(std::vector<int32_t>(ids.begin(), ids.end()), Shape{1, static_cast<int64_t>(ids.size())})
          .to(model_.device());
  const Tensor logits = model_.forward_cached(batch, cache_, /*all_logits=*/false, adapter_,
                                              generated ? Qwen3Model::Tokens::Generated : Qwen3Model::Tokens::Prompt);
  NVFP4LM_ASSERT(logits.dtype() == DType::F32 && logits.numel() == vocab_size(), "forward_cached returned {}",
                 logits.str());
  return logits;
}

std::span<const float> Qwen3CachedLm::forward(std::span<const int32_t> ids, FedTokens fed) {
  logits_ = device_logits(ids, fed).to(Device::cpu()).contiguous().reshape(Shape{vocab_size()});
  return {logits_.data<float>(), static_cast<size_t>(vocab_size())};
}

int32_t Qwen3CachedLm::forward_choose(std::span<const int32_t> ids, const TokenChoice& choice, FedTokens fed) {
  const Device device = model_.device();
  const Tensor logits = device_logits(ids, fed).narrow(1, 0, choice.candidates);  // row-strided view: no copy
  Tensor id = Tensor::empty({1}, DType::I32, device);
  if (choice.greedy) {
    sample_argmax(logits, id);
  } else {
    const Tensor uniform = Tensor::from_floats({choice.uniform}, Shape{1}).to(device);
    sample_top_k_top_p(logits, uniform, choice.sampling, id);
  }
  return id.to(Device::cpu()).data<int32_t>()[0];
}

uint64_t decode_weight_bytes(const Qwen3Weights& weights, std::optional<uint64_t> lm_head_bytes) {
  auto linear_bytes = [](const LinearWeight& linear) -> uint64_t {
    return linear.is_nvfp4() ? linear.nvfp4.nbytes() : linear.dense.nbytes();
  };
  uint64_t bytes = 0;
  for (const auto& layer : weights.layers) {
    for (const Tensor* norm : {&layer.input_norm, &layer.post_attention_norm, &layer.q_norm, &layer.k_norm})
      bytes += norm->nbytes();
    for (const LinearWeight* linear : layer.linears()) bytes += linear_bytes(*linear);
  }
  bytes += weights.final_norm.nbytes();
  bytes += lm_head_bytes.value_or(linear_bytes(weights.lm_head));
  if (weights.embed_tokens.defined() && weights.embed_tokens.rank() == 2)
    bytes += weights.embed_tokens.nbytes() / static_cast<uint64_t>(weights.embed_tokens.dim(0));
  return bytes;
}

uint64_t decode_weight_bytes(const Qwen3Model& model) {
  const uint64_t int8_head = model.int8_lm_head_bytes();
  return decode_weight_bytes(model.weights(), int8_head ? std::optional<uint64_t>(int8_head) : std::nullopt);
}

std::string answer_greedy(const Qwen3Model& model, const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                          const std::string& question, int64_t max_new_tokens, int adapter) {
  const std::vector<ChatMessage> messages = {{"user", question}};
  const std::vector<int32_t> prompt = encode_generation_prompt(tokenizer, chat_template, messages, false);
  Qwen3CachedLm lm(model, static_cast<int64_t>(prompt.size()) + max_new_tokens, {}, std::nullopt, adapter);
  GenerationOptions options;
  options.max_new_tokens = max_new_tokens;
  options.sampling.temperature = 0.0f;
  options.eos_ids =
      end_of_sequence_ids(model.config(), find_generation_config(model.source()), tokenizer, model.config().vocab_size);
  Generator generator(lm, tokenizer, options);
  return generator.generate(prompt).text;
}

}  // namespace nvfp4lm
