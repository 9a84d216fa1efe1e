// BatchEngine: continuous batching over one Qwen3Model, driven by one thread (the serve scheduler, or
// `generate --prompts`). A fixed pool of KV-cache slots holds one sequence each, up to context() tokens;
// sequences join (start: the prompt is prefilled into a free slot and the first token chosen) and leave (they
// finish, or are cancelled) between steps; step() runs one decode step for all running sequences together — B rows
// in one forward, each at its own position in its own slot (Qwen3DecodeStep::run_rows) — then chooses each
// sequence's next token with its own sampler.
//
// Each sequence gets exactly the tokens it would get alone from Generator (generator.h) with the same options and
// seed: the prefill is the same forward_cached call; the decode step computes every row on its own (the linears
// with ops/gemm.h LinearRows::Independent, attention per row); tokens are chosen from a host copy of the logits by
// the same Sampler and ended by the same AnswerStream. tests/infer/test_batch_engine.cpp checks it token for
// token, with sequences of different lengths joining at different steps.
//
// Decode steps: one per batch size, created when first needed and kept (their buffers too). Eager (the CPU, or
// --cuda-graph off) uses the exact number of running sequences. With DecodeMode::Graph (CUDA) each step is a
// captured graph for a bucket of 1, 2, 4, ... rows (up to the pool size); rows past the running sequences are
// padding that writes a spare slot of the pool, so a bucket's graph serves every batch size up to it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "infer/answer_stream.h"
#include "infer/generator.h"
#include "infer/logprobs.h"
#include "infer/sampler.h"
#include "model/kv_cache.h"
#include "model/qwen3_decode_step.h"
#include "model/qwen3_model.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm {

struct BatchEngineOptions {
  int64_t slots = 8;                 // sequences at once (KV-cache slots)
  int64_t context = 4096;            // tokens per slot: prompt + generated
  std::optional<DecodeMode> decode;  // none: eager steps; Graph (CUDA): a captured graph per bucket
};

struct SequenceSpec {
  std::vector<int32_t> prompt;  // not empty, at most context() tokens
  // max_new_tokens, sampling (with its seed), eos_ids, stop_strings and skip_special are used; tokens are always
  // chosen on the host (token_choice is ignored).
  GenerationOptions options;
  int top_logprobs = -1;  // -1: none; 0..20: the chosen token's log-probability and this many alternatives
};

// What one sequence did in one step (start or step): the token it chose and what that changed.
struct SequenceEvent {
  int64_t sequence = 0;
  int32_t token = 0;
  std::string text;  // text that became final with this token (possibly empty)
  std::optional<NextTokenLogprobs> logprobs;
  bool finished = false;
  StopReason stop_reason = StopReason::MaxTokens;  // when finished
  std::string stop_detail;
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;  // this token included
};
using SequenceEventSink = std::function<void(const SequenceEvent&)>;

class BatchEngine {
 public:
  // The model must outlive the engine. Allocates the pool (slots x context tokens) at once.
  BatchEngine(const Qwen3Model& model, Tokenizer tokenizer, BatchEngineOptions options);
  ~BatchEngine();
  BatchEngine(const BatchEngine&) = delete;
  BatchEngine& operator=(const BatchEngine&) = delete;

  int64_t slots() const { return options_.slots; }
  int64_t context() const { return options_.context; }
  int64_t running() const { return static_cast<int64_t>(sequences_.size()); }
  bool has_free_slot() const { return running() < slots(); }
  const Qwen3Model& model() const { return model_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  // Bytes of one slot of `context` tokens: K and V of every layer.
  static uint64_t slot_bytes(const Qwen3Config& config, int64_t context, DType dtype);
  // Slots of `context` tokens that fit: min(wanted, what the device's memory limit (--max-memory, core/memory.h)
  // leaves after what is allocated now and the engine's work space — the prefill of a prompt as long as the context
  // and the decode steps' buffers); `wanted` without a limit. Error (naming the numbers and the flags) when not even
  // one slot fits.
  static int64_t slots_within_memory(const Qwen3Model& model, int64_t context, int64_t wanted);
  // "eager steps" / "CUDA graphs per batch bucket (1, 2, 4, 8), 2 captured".
  std::string decode_path() const;

  // Error (one line, naming the numbers) when `spec` cannot run: empty prompt, more tokens than the context,
  // sampling options out of range (logit_bias ids outside the vocabulary too), empty stop string, top_logprobs
  // outside [-1, 20].
  void check(const SequenceSpec& spec) const;
  // Prefills the prompt into a free slot and chooses the first token (its event goes to `sink`; a sequence may
  // finish right there). Returns the sequence id. Error when check() fails or no slot is free.
  int64_t start(SequenceSpec spec, const SequenceEventSink& sink);
  // One decode step of every running sequence; one event each. Finished sequences leave and free their slots.
  void step(const SequenceEventSink& sink);
  // Ends a running sequence now and frees its slot (no event); unknown or finished ids are ignored.
  void cancel(int64_t sequence);

 private:
  struct Sequence;
  // Chooses the next token of `sequence` from its logits row and reports it.
  void choose(Sequence& sequence, std::span<const float> logits, const SequenceEventSink& sink);
  Qwen3DecodeStep& decode_step(int64_t rows);
  int64_t bucket_for(int64_t running) const;
  void release(size_t index);

  const Qwen3Model& model_;
  Tokenizer tokenizer_;
  BatchEngineOptions options_;
  KVCache pool_;  // slots rows (+ one spare for graph padding rows)
  std::vector<bool> slot_used_;
  std::vector<std::unique_ptr<Sequence>> sequences_;           // running, in start order
  std::map<int64_t, std::unique_ptr<Qwen3DecodeStep>> steps_;  // by rows; refer to pool_
  int64_t next_id_ = 1;
};

}  // namespace nvfp4lm
