// `nvfp4lm stress kv`: the KV-cache stress matrix. Each case drives one cache through a script of operations —
// prompts of several lengths (around the CPU's 8-row fused-kernel threshold and longer), greedy generation of
// several lengths, rewinds (KVCache::set_length back, then other tokens appended), chat turns appended to what is
// cached, caches sized exactly, larger than needed and up to the model's context limit, a cache filled exactly and
// then asked for one token more — and checks every logits row the cache path produced against a full forward
// (no cache) of the same sequence on the same device, at the same position.
//
// What the cache path is: what generation uses on that device (Qwen3CachedLm): multi-token appends through
// Qwen3Model::forward_cached, single tokens through the decode step `decode` names (on CUDA the replayed CUDA
// graph by default) or forward_cached without one. Judged by tools/logit_diff.h: fp32 on the CPU, bf16-activations
// on CUDA. Rows are checked when the sequence they belong to is about to change (before a rewind) and at the end of
// the case, with one reference forward that returns only the positions needed (Qwen3Model::forward_last).
// Appending to a full cache must be refused with an Error (the cache unchanged, the next steps still right); a case
// also fails on any other error, naming it.
//
// The default matrix is short (a few seconds on `synth --preset tiny`); `full` adds the long one: more lengths,
// caches up to the context limit (bounded by max_cache), more rewinds and turns.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/kv_cache.h"
#include "model/qwen3_decode_step.h"
#include "model/qwen3_model.h"
#include "tokenizer/tokenizer.h"
#include "tools/logit_diff.h"

namespace nvfp4lm {

// One operation of a case's script.
struct StressOp {
  enum class Kind {
    Append,    // `count` random token ids in one call
    ChatTurn,  // the next chat turn's ids (a user message and the assistant header; the first turn opens the chat)
    Decode,    // `count` greedy steps of one token each
    Rewind,    // set the cache's length to `count`
    Overflow,  // feed `count` tokens to a cache without room for them: must be an Error, the cache unchanged
  };
  Kind kind = Kind::Append;
  int64_t count = 0;
};

struct StressCase {
  std::string name;
  int64_t cache_tokens = 0;
  std::vector<StressOp> ops;
};

// The matrix for a model with `context` positions: short, or full with caches up to min(context, max_cache)
// (max_cache 0: no bound besides the context).
std::vector<StressCase> stress_kv_cases(int64_t context, bool full, int64_t max_cache = 0);

struct StressKvOptions {
  bool full = false;
  int64_t max_cache = 0;
  uint64_t seed = 0;  // random token ids
  std::optional<DecodeMode> decode;
  LogitTolerances tolerances;
  // Called after every operation with the case's cache. For tests that the check can fail (they damage the cache
  // on purpose); nothing else sets it.
  std::function<void(const StressCase&, KVCache&)> after_op;
};

struct StressCaseResult {
  std::string name;
  int64_t cache_tokens = 0;
  int64_t final_tokens = 0;  // tokens in the cache at the end
  int64_t checked_rows = 0;  // logits rows compared with the full forward
  LogitDiff worst;           // the comparison with the largest max |Δlogit| (positions: of its sequence)
  double bound = 0;          // worst's bound
  std::string failure;       // why the case failed ("" when it passed)
  double seconds = 0;
  bool pass() const { return failure.empty(); }
};

struct StressKvReport {
  std::string device, compute_path, decode_path;
  int64_t largest_cache = 0;  // the context limit, or max_cache below it: larger cases are left out
  ToleranceClass tolerance_class = ToleranceClass::Fp32;
  double tolerance = 0;
  std::vector<StressCaseResult> cases;
  int64_t failed() const;
  bool pass() const { return !cases.empty() && failed() == 0; }  // checking nothing is not a pass
};

// Error when no case of the matrix fits the cache (max_cache below the smallest case): it would check nothing.
StressKvReport run_stress_kv(const Qwen3Model& model, const Tokenizer& tokenizer, const StressKvOptions& options);

std::string stress_kv_table(const StressKvReport& report);
nlohmann::json stress_kv_json(const StressKvReport& report);

}  // namespace nvfp4lm
