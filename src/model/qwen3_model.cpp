// Qwen3Model: loading, input checks and the two forward entry points (the layer math is in qwen3_inference.cpp).
#include "model/qwen3_model.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <string_view>
#include <vector>

#include "core/logging.h"
#include "core/memory.h"
#include "model/qwen3_inference.h"
#include "ops/cpu_backend.h"
#include "ops/elementwise.h"
#include "ops/nvfp4_linear.h"
#include "ops/nvfp4_w4a4_linear.h"

namespace nvfp4lm {
namespace {

// ids / positions / segment ids come from callers that build them from user data: checked, not asserted.
void check_i32_batch(const Tensor& t, const char* what, int64_t batch, int64_t tokens) {
  NVFP4LM_CHECK(t.defined() && t.dtype() == DType::I32 && t.rank() == 2,
                "{} must be an I32 [batch, tokens] tensor, got {}", what, t.defined() ? t.str() : "nothing");
  NVFP4LM_CHECK(batch < 0 || (t.dim(0) == batch && t.dim(1) == tokens), "{} is {}, expected [{}, {}] like the ids",
                what, t.str(), batch, tokens);
}

// Contiguous copy on `device` (a no-op for a contiguous tensor already there).
Tensor on_device(const Tensor& t, Device device) { return t.contiguous().to(device); }

void log_linear_count(const Qwen3Weights& weights, int64_t& nvfp4, int64_t& total) {
  for (const Qwen3LayerWeights& layer : weights.layers) {
    for (const LinearWeight* linear : layer.linears()) {
      ++total;
      nvfp4 += linear->is_nvfp4() ? 1 : 0;
    }
  }
  ++total;
  nvfp4 += weights.lm_head.is_nvfp4() ? 1 : 0;
}

// CpuMatmul::Int8Activations on the CPU: every NVFP4 linear in the layout its decode kernel reads fastest, where this
// CPU has that kernel (nvfp4_for_cpu_int8_decode); the row-layout copies (mapped file pages) are dropped.
void interleave_for_int8_decode(Qwen3Weights& weights) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<LinearWeight*> linears{&weights.lm_head};
  for (Qwen3LayerWeights& layer : weights.layers)
    for (LinearWeight* linear : layer.linears()) linears.push_back(linear);
  int64_t count = 0;
  size_t bytes = 0;
  for (LinearWeight* linear : linears) {
    if (!linear->is_nvfp4()) continue;
    linear->nvfp4 = nvfp4_for_cpu_int8_decode(linear->nvfp4);
    if (linear->nvfp4.layout != Nvfp4Layout::Interleaved16) return;  // this CPU keeps the row layout
    ++count;
    bytes += linear->nvfp4.nbytes();
  }
  if (count > 0)
    log::info(
        "NVFP4 weights regrouped 16 rows at a time for the AVX-512 integer decode kernel: {} linears, {:.1f} MiB "
        "in {:.1f} s",
        count, to_mib(bytes), std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

}  // namespace

Qwen3Model::Qwen3Model(Qwen3Config config, Qwen3Weights weights)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      workspace_(std::make_shared<detail::InferenceWorkspace>()) {
  NVFP4LM_ASSERT(weights_.embed_tokens.defined() && weights_.embed_tokens.rank() == 2 &&
                     weights_.embed_tokens.dim(0) == config_.vocab_size &&
                     weights_.embed_tokens.dim(1) == config_.hidden_size,
                 "Qwen3Model: embed_tokens {} does not match the config", weights_.embed_tokens.str());
  NVFP4LM_ASSERT(static_cast<int64_t>(weights_.layers.size()) == config_.num_hidden_layers,
                 "Qwen3Model: {} layers of weights for {} in the config", weights_.layers.size(),
                 config_.num_hidden_layers);
  const Device dev = device();
  if (weights_.any_nvfp4()) {
    nvfp4_linear_compute_path(dev);  // throws when NVFP4 cannot run on this device
    // Large enough for every projection in one pass; a quantized lm_head is dequantized in row blocks.
    int64_t elements = weights_.lm_head.in_features;
    for (const Qwen3LayerWeights& layer : weights_.layers) {
      for (const LinearWeight* linear : layer.linears())
        if (linear->is_nvfp4()) elements = std::max(elements, nvfp4_linear_scratch_elements(linear->nvfp4));
    }
    workspace_->dequant_scratch = Tensor::empty({elements}, compute_dtype(), dev);
  }
  // The FP4 tensor cores take W4A4 linears whose weights are NVFP4 (not those dequantized at load).
  bool nvfp4_w4a4 = false;
  for (const Qwen3LayerWeights& layer : weights_.layers)
    for (const LinearWeight* linear : layer.linears())
      nvfp4_w4a4 = nvfp4_w4a4 || (linear->is_w4a4() && linear->is_nvfp4());
  workspace_->w4a4_native = dev.is_cuda() && nvfp4_w4a4 && nvfp4_w4a4_native(dev);
  workspace_->w4a4_native_any_rows =
      workspace_->w4a4_native && std::string_view(nvfp4_w4a4_compute_path(dev)) == kNvfp4W4a4CudaPath;
  workspace_->ensure_rope(config_, std::min<int64_t>(config_.max_position_embeddings, 4096), dev);
}

Qwen3Model Qwen3Model::load(const fs::path& path, const ModelOptions& options) {
  OpenModelOptions open_options;
  open_options.config_path = options.config_path;
  open_options.tokenizer_dir = options.tokenizer_dir;
  const std::unique_ptr<ModelFiles> files = open_model(path, open_options);
  return from_files(*files, options);
}

Qwen3Model Qwen3Model::from_files(const ModelFiles& files, const ModelOptions& options) {
  const MemoryPhase phase("load");
  files.config().validate(files.config_path().string());
  Qwen3Model model(files.config(), load_qwen3_weights(files, options.device, compute_dtype_for(options.device),
                                                      options.dequantize_nvfp4, options.w4a4_activations));
  model.workspace_->cpu_matmul = options.cpu_matmul;
  if (options.device.is_cpu() && options.cpu_matmul == CpuMatmul::Int8Activations)
    interleave_for_int8_decode(model.weights_);
  const Tensor& head = model.weights_.lm_head.dense;
  if (options.device.is_cpu() && options.cpu_matmul == CpuMatmul::Int8Activations &&
      !model.weights_.lm_head.is_nvfp4() && Int8LmHead::supported(head)) {
    const auto start = std::chrono::steady_clock::now();
    model.workspace_->int8_lm_head = std::make_shared<const Int8LmHead>(head);
    log::info("lm_head: the {} table copied to int8 (a scale per 16 values) for decode steps, {:.1f} MiB in {:.1f} s",
              dtype_name(head.dtype()), to_mib(model.workspace_->int8_lm_head->bytes()),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  model.source_ = files.path();
  model.tokenizer_dir_ = options.tokenizer_dir ? options.tokenizer_dir : files.tokenizer_dir();
  int64_t nvfp4_linears = 0, linears = 0;
  log_linear_count(model.weights_, nvfp4_linears, linears);
  log::info(
      "model {}: format {}, device {}, compute path {}, precision {}, weights {:.1f} MiB ({} of {} linears NVFP4)",
      files.path().string(), model_format_name(files.format()), options.device.label(), model.compute_path(),
      model.precision(), to_mib(model.weights_.nbytes()), nvfp4_linears, linears);
  if (options.device.is_cpu())
    log::info("CPU kernels: {} BF16, {} NVFP4 decode, {} OpenMP threads{}", cpu_bf16_kernel(),
              cpu_nvfp4_dot_kernel(model.cpu_matmul()), omp_get_max_threads(), cpu_isa_limit_note());
  return model;
}

Device Qwen3Model::device() const { return weights_.embed_tokens.device(); }

DType Qwen3Model::compute_dtype() const { return compute_dtype_for(device()); }

std::string Qwen3Model::compute_path() const {
  const Device dev = device();
  const std::string path = weights_.any_nvfp4() ? std::string(nvfp4_linear_compute_path(dev, workspace_->cpu_matmul))
                           : dev.is_cpu()       ? "cpu/dense"
                                                : "cuda/dense-bf16";
  if (weights_.w4a4_max_in_features() == 0) return path;
  // W4A4 layers: on the FP4 tensor cores, or their NVFP4 activations' values through the path above.
  if (workspace_->w4a4_native_any_rows) return fmt::format("{} + {}", nvfp4_w4a4_compute_path(dev), path);
  if (workspace_->w4a4_native)  // cuBLASLt: not batch-invariant, so not where a KV cache is (qwen3_inference.h)
    return fmt::format("{} (W4A4 layers without a KV cache; with one, their NVFP4 activations' values) + {}",
                       nvfp4_w4a4_compute_path(dev), path);
  const char* through = workspace_->cpu_matmul == CpuMatmul::Int8Activations && dev.is_cpu() && weights_.any_nvfp4()
                            ? " through cpu/nvfp4-bf16"
                            : "";
  return fmt::format("{} (W4A4 layers: their NVFP4 activations' values{})", path, through);
}

CpuMatmul Qwen3Model::cpu_matmul() const { return workspace_->cpu_matmul; }

uint64_t Qwen3Model::int8_lm_head_bytes() const {
  return workspace_->int8_lm_head ? workspace_->int8_lm_head->bytes() : 0;
}

std::string Qwen3Model::precision() const {
  std::string compute = "bf16 activations, fp32 accumulation";
  if (compute_dtype() == DType::F32)
    compute = workspace_->cpu_matmul == CpuMatmul::Fp32 ? "fp32"
              : workspace_->cpu_matmul == CpuMatmul::Bf16Activations
                  ? "fp32, bf16 activations in the prefill's products"
                  : "fp32, bf16 activations in the prefill's products, "
                    "int8 in the decode step's NVFP4 products";
  const DType dense = weights_.layers.empty() || weights_.layers[0].q_proj.is_nvfp4()
                          ? weights_.embed_tokens.dtype()
                          : weights_.layers[0].q_proj.dense.dtype();
  const std::string weights = weights_.any_nvfp4() ? "NVFP4" : fmt::format("dense {}", dtype_name(dense));
  // The CPU model keeps a BF16 embedding as stored; the lm_head is that table unless it was quantized on its own.
  std::string table;
  if (weights_.embed_tokens.dtype() == DType::BF16 && compute_dtype() == DType::F32)
    table = weights_.lm_head.is_nvfp4() ? ", embedding BF16, lm_head NVFP4" : ", embedding / lm_head BF16";
  if (workspace_->int8_lm_head) table += ", the lm_head's decode steps int8";
  // The checkpoint's W4A4 function (ModelOptions::w4a4_activations): said wherever it applies.
  const std::string activations =
      weights_.w4a4_max_in_features() > 0
          ? ", W4A4: the layers' linear inputs NVFP4 with the checkpoint's input_scale (--w4a4 off: 16-bit)"
          : "";
  return fmt::format("{} (weights {}{}{})", compute, weights, table, activations);
}

KVCache Qwen3Model::make_cache(int64_t batch, int64_t max_tokens) const {
  KVCache cache(config_, batch, max_tokens, compute_dtype(), device());
  const std::lock_guard<std::mutex> lock(workspace_->mutex);
  workspace_->ensure_rope(config_, max_tokens, device());
  return cache;
}

uint64_t Qwen3Model::forward_work_bytes(int64_t batch, int64_t tokens) const {
  uint64_t bytes = detail::InferenceBuffers::bytes(config_, weights_, batch, tokens, /*all_logits=*/false);
  if (lora_) bytes += detail::lora_work_bytes(config_, *lora_, batch * tokens, compute_dtype());
  return bytes;
}

void Qwen3Model::set_lora_adapters(std::shared_ptr<const LoraAdapterSet> adapters) {
  lora_ = std::move(adapters);
  if (lora_)
    log::info("LoRA adapters over the base, applied per request: {} ({:.1f} MiB of stacked {} A / B on {})",
              lora_->describe(), to_mib(lora_->bytes()), dtype_name(compute_dtype()), device().label());
}

void Qwen3Model::check_adapter(int adapter) const {
  NVFP4LM_CHECK(adapter == kNoLoraAdapter || (lora_ && adapter >= 0 && adapter < lora_->count()),
                "LoRA adapter {} asked of a model with {} adapters", adapter, lora_ ? lora_->count() : 0);
}

Tensor lora_mask_rows(const LoraAdapterSet& lora, std::span<const int> adapters, DType dtype, Device device) {
  const auto rows = static_cast<int64_t>(adapters.size());
  Tensor mask = Tensor::empty({rows, lora.width()}, DType::F32);
  for (int64_t r = 0; r < rows; ++r)
    lora.mask_row(adapters[static_cast<size_t>(r)],
                  std::span<float>(mask.data<float>() + r * lora.width(), static_cast<size_t>(lora.width())));
  if (dtype == DType::F32) return mask.to(device);
  Tensor narrow = Tensor::empty(mask.shape(), dtype);
  cast(mask, narrow);  // 0 and 1: exact in every float dtype
  return narrow.to(device);
}

Tensor Qwen3Model::forward(const Tensor& ids, const Tensor* positions, const Tensor* segment_ids, int adapter) const {
  check_i32_batch(ids, "forward: ids", -1, -1);
  check_adapter(adapter);
  const int64_t batch = ids.dim(0), tokens = ids.dim(1);
  NVFP4LM_CHECK(batch > 0 && tokens > 0, "forward: ids {} holds no tokens", ids.str());
  Tensor position_tensor;
  int64_t max_position = tokens - 1;
  if (positions != nullptr) {
    check_i32_batch(*positions, "forward: positions", batch, tokens);
    const Tensor host = positions->contiguous().to(Device::cpu());
    const int32_t* p = host.data<int32_t>();
    const auto [lo, hi] = std::minmax_element(p, p + host.numel());
    NVFP4LM_CHECK(*lo >= 0, "forward: position {} is negative", *lo);
    max_position = *hi;
    position_tensor = host;
  } else {
    std::vector<int32_t> values(static_cast<size_t>(batch * tokens));
    for (int64_t i = 0; i < batch * tokens; ++i) values[static_cast<size_t>(i)] = static_cast<int32_t>(i % tokens);
    position_tensor = Tensor::from_ints(values, Shape{batch, tokens});
  }
  Tensor segments;
  if (segment_ids != nullptr) {
    check_i32_batch(*segment_ids, "forward: segment_ids", batch, tokens);
    segments = on_device(*segment_ids, device());
  }
  return run(ids, position_tensor, segment_ids ? &segments : nullptr, nullptr, true, max_position, 0, adapter);
}

Tensor Qwen3Model::forward_last(const Tensor& ids, int64_t last_tokens) const {
  check_i32_batch(ids, "forward_last: ids", -1, -1);
  const int64_t batch = ids.dim(0), tokens = ids.dim(1);
  NVFP4LM_CHECK(batch > 0 && tokens > 0, "forward_last: ids {} holds no tokens", ids.str());
  NVFP4LM_CHECK(last_tokens >= 1 && last_tokens <= tokens, "forward_last: {} last positions asked of {} tokens",
                last_tokens, tokens);
  std::vector<int32_t> values(static_cast<size_t>(batch * tokens));
  for (int64_t i = 0; i < batch * tokens; ++i) values[static_cast<size_t>(i)] = static_cast<int32_t>(i % tokens);
  return run(ids, Tensor::from_ints(values, Shape{batch, tokens}), nullptr, nullptr, true, tokens - 1, last_tokens);
}

Tensor Qwen3Model::forward_cached(const Tensor& ids, KVCache& cache, bool all_logits, int adapter,
                                  Tokens tokens_are) const {
  check_i32_batch(ids, "forward_cached: ids", cache.batch(), ids.rank() == 2 ? ids.dim(1) : 0);
  check_adapter(adapter);
  const int64_t batch = ids.dim(0), tokens = ids.dim(1), start = cache.length();
  NVFP4LM_CHECK(tokens > 0, "forward_cached: ids {} holds no tokens", ids.str());
  NVFP4LM_CHECK(start + tokens <= cache.max_tokens(),
                "the context is full: {} tokens in the KV cache plus {} new ones exceed its maximum of {} tokens "
                "(start a new conversation, or raise the context length / max tokens)",
                start, tokens, cache.max_tokens());
  NVFP4LM_ASSERT(cache.keys(0).device() == device() && cache.keys(0).dtype() == compute_dtype(),
                 "forward_cached: KV cache {} does not match the model (make it with make_cache)", cache.keys(0).str());
  std::vector<int32_t> values(static_cast<size_t>(batch * tokens));
  for (int64_t i = 0; i < batch * tokens; ++i)
    values[static_cast<size_t>(i)] = static_cast<int32_t>(start + i % tokens);
  Tensor logits = run(ids, Tensor::from_ints(values, Shape{batch, tokens}), nullptr, &cache, all_logits,
                      start + tokens - 1, 0, adapter, tokens_are == Tokens::Generated);
  cache.set_length(start + tokens);
  return logits;
}

Tensor Qwen3Model::run(const Tensor& ids, const Tensor& positions, const Tensor* segment_ids, KVCache* cache,
                       bool all_logits, int64_t max_position, int64_t logit_tokens, int adapter, bool decode) const {
  const Tensor device_ids = on_device(ids, device());
  const Tensor device_positions = on_device(positions, device());
  Tensor mask;
  if (adapter != kNoLoraAdapter)
    mask =
        lora_mask_rows(*lora_, std::vector<int>(static_cast<size_t>(ids.numel()), adapter), compute_dtype(), device());
  const std::lock_guard<std::mutex> lock(workspace_->mutex);
  workspace_->ensure_rope(config_, max_position + 1, device());
  detail::InferenceStep step;
  step.ids = &device_ids;
  step.positions = &device_positions;
  step.segment_ids = segment_ids;
  step.cache = cache;
  step.all_logits = all_logits;
  step.logit_tokens = logit_tokens;
  step.decode = decode;
  if (adapter != kNoLoraAdapter) {
    step.lora = lora_.get();
    step.lora_mask = &mask;
  }
  return detail::qwen3_inference_forward(config_, weights_, *workspace_, step);
}

}  // namespace nvfp4lm
