// Qwen3 for inference (DESIGN.md §3): loads any supported MODEL (HF safetensors BF16/F16/F32, ModelOpt NVFP4,
// `.dat`), keeps NVFP4 linears packed and dequantizes them per layer into a scratch buffer (cpu/dequant-gemm;
// on CUDA the fused W4A16 path), and runs the forward pass with or without a KV cache.
//
// Precision: activations in compute_dtype() (F32 on CPU, BF16 on CUDA); norms, softmax and logits in fp32.
// Logits always come back as F32.
//
// Work space: the RoPE table (built once, grown when a position beyond it shows up) and the NVFP4 dequantization
// scratch live in the model and are shared by its copies; forward calls on one model are serialised by a mutex
// (they are const, and safe to call from several threads, but do not run in parallel). Activation buffers are
// allocated once per call and reused by every layer.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>

#include "core/files.h"
#include "core/tensor.h"
#include "io/hf_config.h"
#include "io/model_files.h"
#include "model/kv_cache.h"
#include "model/lora_runtime.h"
#include "model/qwen3_weights.h"
#include "ops/cpu_matmul.h"

namespace nvfp4lm {

namespace detail {
struct InferenceWorkspace;  // model/qwen3_inference.h
}

struct ModelOptions {
  Device device = Device::cpu();
  std::optional<fs::path> config_path;    // passed to open_model
  std::optional<fs::path> tokenizer_dir;  // passed to open_model
  // Dequantize NVFP4 linears once at load into dense compute-dtype weights (compute path cpu/dense or
  // cuda/dense-bf16): the same weights through the dense kernels, for parity checks.
  bool dequantize_nvfp4 = false;
  // The CPU's kernels for the NVFP4 projections and a BF16 lm_head (ops/cpu_matmul.h): the fp32 reference
  // (cpu/dequant-gemm, the library's default), BF16 activations in the prefill's products (cpu/nvfp4-bf16), or
  // besides int8 ones in the decode steps (cpu/nvfp4-int8, what generate / chat / serve / bench infer use unless
  // --cpu-matmul says otherwise; a BF16 lm_head then gets an int8 copy at load). Ignored on CUDA.
  CpuMatmul cpu_matmul = CpuMatmul::Fp32;
  // A W4A4 checkpoint (ModelOpt quant_algo NVFP4: calibrated input_scale on its layers' linears) runs as exported: each
  // such linear's input quantized to NVFP4 with its input_scale, as vLLM and TensorRT-LLM run it — on Blackwell SM 12.x
  // NVFP4 x NVFP4 on the FP4 tensor cores (cuda/nvfp4-mma-fp4), elsewhere the quantized values through the W4A16
  // kernels. false: activations stay 16-bit (W4A16). A checkpoint without input scales is W4A16 either way.
  bool w4a4_activations = true;
};

class Qwen3Model {
 public:
  // Opens and loads a model; logs the format, device, compute path and precision.
  static Qwen3Model load(const fs::path& path, const ModelOptions& options = {});
  static Qwen3Model from_files(const ModelFiles& files, const ModelOptions& options = {});
  Qwen3Model(Qwen3Config config, Qwen3Weights weights);

  const Qwen3Config& config() const { return config_; }
  const Qwen3Weights& weights() const { return weights_; }
  Device device() const;
  DType compute_dtype() const;  // F32 on CPU, BF16 on CUDA
  // "cpu/dequant-gemm", "cpu/nvfp4-bf16", "cuda/nvfp4-w4a16", "cuda/dequant-gemm", "cpu/dense", "cuda/dense-bf16"
  std::string compute_path() const;
  // "fp32 (weights NVFP4)", "bf16 activations, fp32 accumulation (weights dense BF16)", ...
  std::string precision() const;
  CpuMatmul cpu_matmul() const;
  // Bytes of the lm_head's int8 copy the CPU decode steps read under CpuMatmul::Int8Activations (ops/int8_lm_head.h);
  // 0 when the model has none.
  uint64_t int8_lm_head_bytes() const;
  // Where the model came from (for messages) and its tokenizer directory, if any.
  const fs::path& source() const { return source_; }
  const std::optional<fs::path>& tokenizer_dir() const { return tokenizer_dir_; }

  // LoRA adapters applied at run time over these weights (model/lora_runtime.h), shared by the model's copies; a
  // forward names the one its rows use (`adapter`: an index of the set, or kNoLoraAdapter for the base alone).
  void set_lora_adapters(std::shared_ptr<const LoraAdapterSet> adapters);
  const LoraAdapterSet* lora_adapters() const { return lora_.get(); }
  // Error unless `adapter` is kNoLoraAdapter or an index of the adapter set.
  void check_adapter(int adapter) const;

  // Full causal forward without a cache. ids: I32 [B, T] (on any device). positions: I32 [B, T] (default
  // 0..T-1); segment_ids: I32 [B, T] for packed rows (attention stays inside a segment). Returns F32 [B, T, V].
  Tensor forward(const Tensor& ids, const Tensor* positions = nullptr, const Tensor* segment_ids = nullptr,
                 int adapter = kNoLoraAdapter) const;
  // forward(ids) with logits for the last `last_tokens` positions of each row only (1 <= last_tokens <= T):
  // F32 [B, last_tokens, V]. The same computation up to the final norm; the lm_head runs on fewer rows, so a long
  // sequence's reference logits need not hold T x V floats.
  Tensor forward_last(const Tensor& ids, int64_t last_tokens) const;

  // Appends ids I32 [B, T] at positions cache.length() .. cache.length()+T-1, advances the cache, and returns
  // logits F32 [B, V] of the last position (or [B, T, V] when all_logits). Throws Error when the cache would
  // overflow (the message names the context length and how to raise it). `tokens` says what the ids are, which
  // chooses the kernels (ops/linear_rows.h): prompt positions get the same bits however the prompt is split into
  // calls; generated tokens fed back run the decode kernels, as Qwen3DecodeStep does.
  enum class Tokens { Prompt, Generated };
  Tensor forward_cached(const Tensor& ids, KVCache& cache, bool all_logits = false, int adapter = kNoLoraAdapter,
                        Tokens tokens = Tokens::Prompt) const;

  // A cache for `batch` rows of up to `max_tokens` tokens in the compute dtype on the model's device (also
  // extends the RoPE table to max_tokens so decoding never rebuilds it).
  KVCache make_cache(int64_t batch, int64_t max_tokens) const;

  // Bytes of the activation buffers one inference forward of `batch` rows x `tokens` new tokens allocates (with the
  // last position's logits only, as forward_cached and the decode step run), for sizing memory budgets.
  uint64_t forward_work_bytes(int64_t batch, int64_t tokens) const;

 private:
  friend class Qwen3DecodeStep;  // model/qwen3_decode_step.h: shares the workspace (RoPE table, scratch, mutex)
  // logit_tokens: logits of the last logit_tokens positions of each row (0: every position).
  Tensor run(const Tensor& ids, const Tensor& positions, const Tensor* segment_ids, KVCache* cache, bool all_logits,
             int64_t max_position, int64_t logit_tokens = 0, int adapter = kNoLoraAdapter, bool decode = false) const;

  Qwen3Config config_;
  Qwen3Weights weights_;
  fs::path source_;
  std::optional<fs::path> tokenizer_dir_;
  std::shared_ptr<detail::InferenceWorkspace> workspace_;
  std::shared_ptr<const LoraAdapterSet> lora_;
};

// Fills `mask` (CPU F32 [rows, lora.width()]) with the mask row of each row's adapter (`adapters`, one per row) and
// returns it in `dtype` on `device`: the InferenceStep::lora_mask of those rows.
Tensor lora_mask_rows(const LoraAdapterSet& lora, std::span<const int> adapters, DType dtype, Device device);

}  // namespace nvfp4lm
