// Qwen3DecodeStep: one decode step of a Qwen3Model (one new token for each of B sequences) with every buffer
// fixed, so that on CUDA the whole step (embedding, every layer, final norm, lm_head: a few hundred kernels) is
// captured once as a CUDA graph and replayed each step with a single launch. What changes from step to step — the
// token ids, the positions, and which cache row (sequence slot) each row reads and writes — lives in device
// tensors that the captured kernels read (model/qwen3_inference.h, InferenceStep::positions_on_device): the host
// copies the new values in, replays, and reads the logits back.
//
// With LoRA adapters on the model (Qwen3Model::set_lora_adapters) every step runs their terms, each row masked to its
// own adapter (DecodeRow::adapter) by a device tensor the host rewrites like the ids: one graph for any mix.
//
// Two ways to drive it: run(ids) decodes every row of the cache together (row b in cache row b, all at
// cache.length(), which it advances: generate and chat); run_rows(rows) decodes B sequences that each sit in
// their own row of a larger cache at their own position (the slot pool of infer/batch_engine.h, where sequences
// join and leave between steps) and leaves cache.length() alone. Each row's logits are those it would get alone
// (the step's linears compute rows independently, ops/gemm.h LinearRows).
//
// Modes: Graph (CUDA only): the first step runs op by op (which also warms GEMM plans, kernel attributes and the
// allocator), then the same work is captured; every later step replays it. Eager: the same fixed-buffer step
// launched op by op (`--cuda-graph off`; tests run it on the CPU too). Either gives the logits forward_cached gives
// for the same token, up to the attention kernel's split of the keys (tests/model/test_qwen3_decode_step.cpp).
//
// The step refers to the model and the cache, which must outlive it; the cache's tensors must not be replaced
// (set_length / reset are fine: each step reads cache.length()). The step keeps its own reference to the RoPE
// table, so a model whose table grows later (a longer forward) does not pull it from under the graph.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "core/tensor.h"
#include "model/kv_cache.h"
#include "model/qwen3_model.h"

namespace nvfp4lm {

enum class DecodeMode { Eager, Graph };

// One row of run_rows: the token to run, its position (also its token slot in the cache row), the cache row
// that holds the sequence's earlier tokens, and the LoRA adapter of the sequence (model/lora_runtime.h; the model's
// adapter set decides which exist, kNoLoraAdapter for the base).
struct DecodeRow {
  int32_t token = 0;
  int32_t position = 0;
  int32_t cache_row = 0;
  int adapter = kNoLoraAdapter;
};

class Qwen3DecodeStep {
 public:
  // Error when mode is Graph and the model is not on a CUDA device (the flag names it). rows: sequences per step
  // (0 = the cache's rows, for run()).
  Qwen3DecodeStep(const Qwen3Model& model, KVCache& cache, DecodeMode mode, int64_t rows = 0);
  ~Qwen3DecodeStep();
  Qwen3DecodeStep(const Qwen3DecodeStep&) = delete;
  Qwen3DecodeStep& operator=(const Qwen3DecodeStep&) = delete;

  // Runs `ids` (one per cache row) at position cache.length() and advances the cache by one, every row with
  // `adapter`. Returns logits F32 [B, V] on the model's device: the step's own tensor, overwritten by the next call.
  // Throws Error when the cache is full (the message names its size), like forward_cached.
  const Tensor& run(std::span<const int32_t> ids, int adapter = kNoLoraAdapter);
  // Runs rows() sequences, each at its own position in its own cache row (distinct rows); logits F32 [rows(), V]
  // as run(). cache.length() is not used or changed. Error for a token outside the vocabulary, a position outside
  // the cache or a cache row outside it.
  const Tensor& run_rows(std::span<const DecodeRow> rows);
  int64_t rows() const;

  DecodeMode mode() const { return mode_; }
  // Nodes of the captured graph (0 before the second step, and in Eager mode).
  size_t graph_nodes() const;
  // "CUDA graph of 612 nodes", "CUDA graph (captured at the next step)", "eager".
  std::string describe() const;

 private:
  struct State;
  void forward_once();
  // Copies the staged inputs to the device and runs (or replays) the step.
  void launch();

  const Qwen3Model& model_;
  KVCache& cache_;
  DecodeMode mode_;
  std::unique_ptr<State> state_;
};

}  // namespace nvfp4lm
