// BatchEngine: continuous batching over one Qwen3Model, driven by one thread (the serve scheduler, or
// `generate --prompts`). A fixed pool of KV-cache slots holds one sequence each, up to context() tokens;
// sequences join (start: the prompt is prefilled into a free slot and the first token chosen) and leave (they
// finish, or are cancelled) between steps; step() runs one decode step for all decoding sequences together — B rows
// in one forward, each at its own position in its own slot (Qwen3DecodeStep::run_rows) — then chooses each
// sequence's next token with its own sampler.
//
// Chunked prefill (the server's path): begin() only takes a slot; the sequence is prefilling until its prompt is in
// the cache. Each prefill(max_tokens) call computes the next chunk of the oldest prefilling sequence (forward_cached
// appends to the slot at its length, positions following it) and, with the prompt's last chunk, chooses the first
// token. A caller alternates prefill() and step() so that running sequences keep getting tokens while a long prompt
// joins; step() leaves prefilling sequences alone. start() is begin() plus the whole prompt at once.
//
// Prefix caching (BatchEngineOptions::prefix_cache): a slot keeps the K/V of its last sequence's prompt after it
// ends (with reuse_answers, also of the generated tokens that were fed back), and remembers those tokens and their
// LoRA adapter (K/V computed with another adapter are not the same prefix). begin() takes the free
// slot whose remembered tokens share the longest prefix with the new prompt (ties and no match: the least recently
// used one, so hot prefixes survive), keeps min(shared, prompt - 1) tokens (the last prompt token is always computed,
// for its logits) and prefills only the rest. Nothing is copied: the new sequence continues in the same slot.
// A running (or prefilling) sequence's prompt is shared too: when one of the same adapter has computed a longer prefix
// of the new prompt than the chosen slot keeps, begin() copies those positions' K/V into the slot (device to device,
// the same bits) — the G completions of one GRPO prompt, or n > 1 answers, prefill the prompt once.
//
// Each sequence gets exactly the tokens and logits it would get alone from Generator (generator.h) with the same
// options and seed, on the CPU bit for bit, whatever the prefix cache held, how its prompt was chunked and which
// sequences shared its decode steps: prompt positions are computed by forward_cached as Tokens::Prompt, whose
// kernels give a position the same bits in a chunk of any size (ops/linear_rows.h LinearRows::Prefill), the same
// as Generator's one call over the whole prompt; the decode step computes every row on its own (LinearRows::
// Independent, attention per row), as Generator's generated tokens; a slot reuses only K/V computed that way
// (prompt positions: a generated token's K/V come from the decode kernels, which a fresh prefill of the same text
// does not use); tokens are chosen from a host copy of the logits by the same Sampler and ended by the same
// AnswerStream. tests/infer/test_batch_engine.cpp and test_batch_engine_prefill.cpp check it with EXPECT_EQ.
// reuse_answers gives that up for the generated tokens (a follow-up turn then reuses the previous answer's K/V:
// close, ~1e-2 in the logits on the int8 CPU path, not equal). On CUDA the kernels of a prefill chunk may depend on
// its size (cuBLASLt), so there chunked and reused prefills are equal up to rounding only.
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
#include <utility>
#include <vector>

#include "infer/answer_stream.h"
#include "infer/constrain/grammar.h"
#include "infer/constrain/token_trie.h"
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
  bool prefix_cache = false;         // reuse the K/V of a prompt's prefix a free slot holds or a running sequence
                                     // computed (see the top)
  bool reuse_answers = false;  // with prefix_cache: a slot also keeps its answer's K/V (not bit-exact, see the top)
};

struct SequenceSpec {
  std::vector<int32_t> prompt;  // not empty, at most context() tokens
  // max_new_tokens, sampling (with its seed), eos_ids, stop_strings and skip_special are used; tokens are always
  // chosen on the host (token_choice is ignored).
  GenerationOptions options;
  int top_logprobs = -1;  // -1: none; 0..20: the chosen token's log-probability and this many alternatives
  // Each event also carries the entropy of the distribution the token was drawn from, softmax(logits / temperature)
  // over the decodable tokens (infer/logprobs.h next_token_entropy; GRPO's `entropy` metric).
  bool entropy = false;
  // When set, the answer is a text of this grammar (a JSON value of a response_format schema, a tool call):
  // disallowed tokens are masked out of the logits before every sampling step, the answer ends (EndOfSequence) as
  // soon as the text is closed, and it is kept closable within max_new_tokens (constrain/grammar_constraint.h).
  // logprobs still describe the model's raw logits.
  std::shared_ptr<const constrain::Grammar> grammar;
  // The LoRA adapter of the model's set the sequence runs with (model/lora_runtime.h), or the base. Sequences of
  // different adapters share the decode steps; a slot's cached prefix is reused only by the same adapter.
  int adapter = kNoLoraAdapter;
};

// What one sequence did in one step (start or step): the token it chose and what that changed.
struct SequenceEvent {
  int64_t sequence = 0;
  int32_t token = 0;
  std::string text;  // text that became final with this token (possibly empty)
  std::optional<NextTokenLogprobs> logprobs;
  std::optional<double> entropy;  // SequenceSpec::entropy
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
  // Sequences holding a slot: prefilling ones and decoding ones.
  int64_t running() const { return static_cast<int64_t>(sequences_.size()); }
  int64_t prefilling() const;
  int64_t decoding() const { return running() - prefilling(); }  // the rows of the next step()
  bool has_free_slot() const { return running() < slots(); }
  // Tokens in the cache of running sequences (of slots() * context()).
  int64_t cached_tokens() const;
  // Prompt tokens the last begin() / start() took from a slot's cache instead of computing them (0: a miss).
  int64_t last_reused_tokens() const { return last_reused_tokens_; }
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
  // outside [-1, 20], a grammar whose shortest text needs more tokens than the budget.
  void check(const SequenceSpec& spec) const;
  // Prefills the prompt into a free slot and chooses the first token (its event goes to `sink`; a sequence may
  // finish right there). Returns the sequence id. Error when check() fails or no slot is free.
  int64_t start(SequenceSpec spec, const SequenceEventSink& sink);
  // Takes a free slot for the sequence (reusing a cached prefix when prefix caching is on) and leaves it
  // prefilling: nothing is computed yet. Returns the sequence id. Error when check() fails or no slot is free.
  int64_t begin(SequenceSpec spec);
  // The oldest prefilling sequence's id, or 0 when none is prefilling.
  int64_t next_prefill() const;
  // Computes the next chunk, at most `max_tokens` tokens (<= 0: all the rest), of the oldest prefilling sequence's
  // prompt; with its last chunk the first token is chosen (its event goes to `sink`; the sequence may finish right
  // there). Returns the tokens computed (0: nothing was prefilling). On an Error the sequence is ended (its slot
  // freed) and the Error goes on.
  int64_t prefill(int64_t max_tokens, const SequenceEventSink& sink);
  // One decode step of every decoding sequence; one event each. Finished sequences leave and free their slots.
  void step(const SequenceEventSink& sink);
  // Ends a running (or prefilling) sequence now and frees its slot (no event); unknown or finished ids are ignored.
  void cancel(int64_t sequence);

 private:
  struct Sequence;
  // A KV-cache slot: whether a sequence holds it, and (prefix caching) the tokens whose K/V it kept from the last
  // one, and when that one ended.
  struct Slot {
    bool used = false;
    std::vector<int32_t> tokens;
    int adapter = kNoLoraAdapter;  // the adapter whose K/V `tokens` are
    uint64_t released_at = 0;
  };
  // Chooses the next token of `sequence` from its logits row and reports it.
  void choose(Sequence& sequence, std::span<const float> logits, const SequenceEventSink& sink);
  // The free slot for `prompt` and how many of its tokens it holds; see the top of this file.
  std::pair<int32_t, int64_t> choose_slot(const std::vector<int32_t>& prompt, int adapter) const;
  // Prefix caching: when a running sequence of the same adapter has computed more of `prompt`'s prefix than the
  // `held` tokens `slot` keeps, copies those K/V into `slot` and returns how many (at most prompt - 1); else 0.
  int64_t copy_running_prefix(const std::vector<int32_t>& prompt, int adapter, int32_t slot, int64_t held);
  int64_t prefill_chunk(size_t index, int64_t max_tokens, const SequenceEventSink& sink);
  Qwen3DecodeStep& decode_step(int64_t rows);
  // The vocabulary's prefix tree for constrained sequences, built by the first one.
  const std::shared_ptr<const constrain::TokenTrie>& token_trie();
  int64_t bucket_for(int64_t running) const;
  // Frees the sequence's slot; the slot remembers the sequence's cached tokens when `keep_cache`.
  void release(size_t index, bool keep_cache = true);

  const Qwen3Model& model_;
  Tokenizer tokenizer_;
  BatchEngineOptions options_;
  KVCache pool_;  // slots rows (+ one spare for graph padding rows)
  std::vector<Slot> slot_state_;
  std::vector<std::unique_ptr<Sequence>> sequences_;           // running, in start order
  std::map<int64_t, std::unique_ptr<Qwen3DecodeStep>> steps_;  // by rows; refer to pool_
  std::shared_ptr<const constrain::TokenTrie> token_trie_;
  int64_t next_id_ = 1;
  uint64_t releases_ = 0;  // the clock of Slot::released_at
  int64_t last_reused_tokens_ = 0;
};

}  // namespace nvfp4lm
