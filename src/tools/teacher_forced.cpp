// See teacher_forced.h.
#include "tools/teacher_forced.h"

#include <memory>

#include "core/error.h"
#include "model/qwen3_decode_step.h"

namespace nvfp4lm {

void teacher_forced_logits(const Qwen3Model& model, SequenceRunner runner, const std::vector<int32_t>& ids,
                           int64_t prompt_tokens, const LogitRowSink& sink) {
  const auto tokens = static_cast<int64_t>(ids.size());
  const int64_t vocab = model.config().vocab_size;
  NVFP4LM_ASSERT(prompt_tokens >= 1 && prompt_tokens <= tokens, "{} prompt tokens of {}", prompt_tokens, tokens);
  const Device device = model.device();
  const Tensor all = Tensor::from_ints(ids, Shape{1, tokens});
  if (runner == SequenceRunner::Full) {
    sink(0, model.forward(all.to(device)).to(Device::cpu()).contiguous().reshape({tokens, vocab}));
    return;
  }
  KVCache cache = model.make_cache(1, tokens);
  sink(0, model.forward_cached(all.narrow(1, 0, prompt_tokens).contiguous().to(device), cache, true)
              .to(Device::cpu())
              .contiguous()
              .reshape({prompt_tokens, vocab}));
  std::unique_ptr<Qwen3DecodeStep> step;
  if (runner != SequenceRunner::Cached)
    step = std::make_unique<Qwen3DecodeStep>(
        model, cache, runner == SequenceRunner::CachedGraph ? DecodeMode::Graph : DecodeMode::Eager);
  for (int64_t t = prompt_tokens; t < tokens; ++t) {
    const int32_t id[1] = {ids[static_cast<size_t>(t)]};
    const Tensor row = step ? step->run(id).to(Device::cpu())
                            : model
                                  .forward_cached(Tensor::from_ints({id[0]}, Shape{1, 1}).to(device), cache, false,
                                                  kNoLoraAdapter, Qwen3Model::Tokens::Generated)
                                  .to(Device::cpu());
    sink(t, row.contiguous().reshape({1, vocab}));
  }
}

}  // namespace nvfp4lm
