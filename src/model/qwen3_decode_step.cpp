// See qwen3_decode_step.h.
#include "model/qwen3_decode_step.h"

#include <fmt/format.h>

#include <optional>
#include <vector>

#include "core/error.h"
#include "model/qwen3_inference.h"

#if NVFP4LM_HAS_CUDA
#include "core/cuda/graph.h"
#endif

namespace nvfp4lm {

struct Qwen3DecodeStep::State {
  Tensor host_inputs;  // CPU I32 [4, B]: ids, positions, cache rows, cache slots (row * max_tokens + position)
  Tensor inputs;       // the same on the model's device; the graph reads it
  Tensor ids, positions, cache_rows, cache_slots;  // views of `inputs`: [B, 1], [B, 1], [B], [B]
  RopeTable rope;
  detail::InferenceBuffers buffers;
  Tensor lora_mask_host;  // CPU [B, width] in the compute dtype (with LoRA adapters)
  Tensor lora_mask;       // the same on the model's device; the graph reads it
#if NVFP4LM_HAS_CUDA
  cuda::CapturedGraph graph;
#endif
  int64_t steps = 0;

  State(const Qwen3Config& config, const Qwen3Weights& weights, const RopeTable& table, int64_t batch)
      : rope(table), buffers(config, weights, batch, 1, /*all_logits=*/false) {
    const Device device = weights.embed_tokens.device();
    host_inputs = Tensor::zeros({4, batch}, DType::I32);
    inputs = Tensor::zeros({4, batch}, DType::I32, device);
    ids = inputs.select(0, 0).reshape({batch, 1});
    positions = inputs.select(0, 1).reshape({batch, 1});
    cache_rows = inputs.select(0, 2);
    cache_slots = inputs.select(0, 3);
  }
};

Qwen3DecodeStep::Qwen3DecodeStep(const Qwen3Model& model, KVCache& cache, DecodeMode mode, int64_t rows)
    : model_(model), cache_(cache), mode_(mode) {
  NVFP4LM_CHECK(mode != DecodeMode::Graph || model.device().is_cuda(),
                "--cuda-graph on needs a CUDA device; the model is on {} (use --device cuda, or --cuda-graph off)",
                model.device().str());
#if !NVFP4LM_HAS_CUDA
  NVFP4LM_CHECK(mode != DecodeMode::Graph, "--cuda-graph on: this build has no CUDA");
#endif
  NVFP4LM_ASSERT(cache.keys(0).device() == model.device() && cache.keys(0).dtype() == model.compute_dtype(),
                 "Qwen3DecodeStep: KV cache {} does not match the model (make it with make_cache)",
                 cache.keys(0).str());
  NVFP4LM_ASSERT(rows >= 0 && rows <= cache.batch(), "Qwen3DecodeStep: {} rows for a cache of {}", rows, cache.batch());
  NVFP4LM_CHECK(cache.batch() * cache.max_tokens() < (int64_t{1} << 31),
                "decode step: a KV cache of {} rows x {} tokens has more token slots than 32-bit indices reach (use a "
                "smaller context or fewer rows)",
                cache.batch(), cache.max_tokens());
  const std::lock_guard<std::mutex> lock(model.workspace_->mutex);
  model.workspace_->ensure_rope(model.config(), cache.max_tokens(), model.device());
  state_ = std::make_unique<State>(model.config(), model.weights(), *model.workspace_->rope,
                                   rows > 0 ? rows : cache.batch());
}

Qwen3DecodeStep::~Qwen3DecodeStep() = default;

size_t Qwen3DecodeStep::graph_nodes() const {
#if NVFP4LM_HAS_CUDA
  return state_->graph.nodes();
#else
  return 0;
#endif
}

std::string Qwen3DecodeStep::describe() const {
  if (mode_ == DecodeMode::Eager) return "eager";
  if (graph_nodes() == 0) return "CUDA graph (captured at the next step)";
  return fmt::format("CUDA graph of {} nodes", graph_nodes());
}

int64_t Qwen3DecodeStep::rows() const { return state_->buffers.x.dim(0); }

void Qwen3DecodeStep::forward_once() {
  detail::InferenceStep step;
  step.ids = &state_->ids;
  step.positions = &state_->positions;
  step.cache = &cache_;
  step.all_logits = false;
  step.rope = &state_->rope;
  step.positions_on_device = true;
  step.decode = true;
  step.cache_rows = &state_->cache_rows;
  step.cache_slots = &state_->cache_slots;
  if (model_.lora_adapters() != nullptr) {
    step.lora = model_.lora_adapters();
    step.lora_mask = &state_->lora_mask;
  }
  detail::qwen3_inference_forward(model_.config(), model_.weights(), *model_.workspace_, step, &state_->buffers);
}

void Qwen3DecodeStep::launch() {
  state_->inputs.copy_from(state_->host_inputs);  // stream-ordered before the step's kernels
  if (state_->lora_mask.defined()) state_->lora_mask.copy_from(state_->lora_mask_host);
  const std::lock_guard<std::mutex> lock(model_.workspace_->mutex);
#if NVFP4LM_HAS_CUDA
  if (mode_ == DecodeMode::Graph && state_->graph.valid()) {
    state_->graph.replay();
  } else {
    forward_once();
    // The first step ran op by op (it also warmed everything up); capture the same work for the next ones.
    if (mode_ == DecodeMode::Graph) state_->graph = cuda::capture_graph("decode step", [this] { forward_once(); });
  }
#else
  forward_once();
#endif
  ++state_->steps;
}

const Tensor& Qwen3DecodeStep::run(std::span<const int32_t> ids, int adapter) {
  const int64_t batch = cache_.batch(), start = cache_.length();
  NVFP4LM_CHECK(static_cast<int64_t>(ids.size()) == batch && rows() == batch,
                "decode step: {} ids for a cache of {} rows", ids.size(), batch);
  NVFP4LM_CHECK(start + 1 <= cache_.max_tokens(),
                "the context is full: {} tokens in the KV cache plus 1 new one exceed its maximum of {} tokens "
                "(start a new conversation, or raise the context length / max tokens)",
                start, cache_.max_tokens());
  std::vector<DecodeRow> rows(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b)
    rows[static_cast<size_t>(b)] = {ids[static_cast<size_t>(b)], static_cast<int32_t>(start), static_cast<int32_t>(b),
                                    adapter};
  const Tensor& logits = run_rows(rows);
  cache_.set_length(start + 1);
  return logits;
}

const Tensor& Qwen3DecodeStep::run_rows(std::span<const DecodeRow> rows) {
  const int64_t batch = this->rows(), vocab = model_.config().vocab_size, max_tokens = cache_.max_tokens();
  NVFP4LM_CHECK(static_cast<int64_t>(rows.size()) == batch, "decode step: {} rows for a step of {}", rows.size(),
                batch);
  int32_t* host = state_->host_inputs.data<int32_t>();
  for (int64_t b = 0; b < batch; ++b) {
    const DecodeRow& row = rows[static_cast<size_t>(b)];
    NVFP4LM_CHECK(row.token >= 0 && row.token < vocab, "decode step: token id {} is outside the vocabulary [0, {})",
                  row.token, vocab);
    NVFP4LM_CHECK(row.position >= 0 && row.position < max_tokens,
                  "the context is full: position {} is outside the KV cache of {} tokens (raise the context length "
                  "/ max tokens)",
                  row.position, max_tokens);
    NVFP4LM_CHECK(row.cache_row >= 0 && row.cache_row < cache_.batch(),
                  "decode step: cache row {} is outside the cache's {} rows", row.cache_row, cache_.batch());
    host[b] = row.token;
    host[batch + b] = row.position;
    host[2 * batch + b] = row.cache_row;
    host[3 * batch + b] = static_cast<int32_t>(row.cache_row * max_tokens + row.position);
  }
  std::vector<int> adapters;
  for (const DecodeRow& row : rows) {
    model_.check_adapter(row.adapter);
    adapters.push_back(row.adapter);
  }
  if (const LoraAdapterSet* lora = model_.lora_adapters()) {
    state_->lora_mask_host = lora_mask_rows(*lora, adapters, model_.compute_dtype(), Device::cpu());
    if (!state_->lora_mask.defined())
      state_->lora_mask = Tensor::empty(state_->lora_mask_host.shape(), model_.compute_dtype(), model_.device());
  }
  launch();
  return state_->buffers.logits;
}

}  // namespace nvfp4lm
