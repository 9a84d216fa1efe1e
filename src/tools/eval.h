// `nvfp4lm eval`: how well a model predicts a data file — mean token cross-entropy, perplexity and token accuracy
// over the tokens training would score (assistant tokens of chat data, every token of plain text), and, against a
// reference model (e.g. the BF16 source of an NVFP4 export), the KL divergence of the model's next-token
// distribution from the reference's and how often both pick the same top token (tools/token_scores.h).
//
// The data goes through the training pipeline: read_dataset renders and masks it exactly as `train` does (same
// formats, chat template, loss mask), without a length limit; then make_eval_windows (data/eval_windows.h)
// reads samples longer than --seq-len by sliding windows of seq_len tokens every --stride tokens, each scoring only
// the tokens the previous one did not; shorter samples are packed into rows of seq_len tokens with attention kept
// inside each (batch.h), one row per forward pass, no padding. Each row runs through Qwen3Model::forward (every
// model format, every device, the inference compute path) and its F32 logits are scored on the host.
//
// Numbers: loss = sum of token losses / tokens (nats), perplexity = exp(loss), accuracy = argmax hits / tokens.
// With seq_len and stride = seq_len - 1 the scored tokens and their contexts are exactly those of training's split
// (dataset.h), so `eval` reproduces the loss `train` reports for the same weights and data.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/files.h"
#include "data/dataset.h"
#include "model/qwen3_model.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm {

inline constexpr int64_t kDefaultEvalSeqLen = 512;  // llama.cpp's perplexity default context

struct EvalOptions {
  fs::path data;
  DataFormat data_format = DataFormat::Auto;
  PairTemplate data_template = PairTemplate::Chat;
  std::string chat_template = "auto";  // --chat-template (tokenizer/chat_template.h)
  bool score_everything = false;       // every token, prompts included (train_on_everything)
  int64_t seq_len = 0;                 // 0: min(kDefaultEvalSeqLen, the model's context)
  int64_t stride = 0;                  // 0: seq_len / 2
  int64_t max_tokens = 0;              // > 0: stop after this many scored tokens
  int adapter = kNoLoraAdapter;        // the model's LoRA adapter to score with (eval --lora); the reference has none
};

struct EvalProgress {
  int64_t rows_done = 0;
  int64_t rows_total = 0;
  int64_t tokens_done = 0;  // scored
  int64_t tokens_total = 0;
  double seconds = 0;
};
using EvalProgressFn = std::function<void(const EvalProgress&)>;

struct EvalReferenceResult {
  std::string model;  // where it came from
  double loss = 0, perplexity = 0, token_accuracy = 0;
  double kl_mean = 0, kl_median = 0, kl_p99 = 0, kl_max = 0;
  double top1_agreement = 0;  // fraction of tokens where both models' most likely token is the same
};

struct EvalResult {
  std::string model;
  DatasetSummary data;  // what read_dataset found
  int64_t seq_len = 0, stride = 0;
  int64_t windows = 0, long_samples = 0, rows = 0;
  int64_t forward_tokens = 0;  // tokens run through the model (context included)
  bool stopped_early = false;  // --max-tokens reached
  int64_t tokens = 0;          // scored
  double loss = 0, perplexity = 0, token_accuracy = 0;
  std::optional<EvalReferenceResult> reference;
  double seconds = 0;
};

// The model's tokenizer must give the ids `model` was trained with; reference may be null. Error (one line) for
// empty data, a bad window setting, or a reference that does not fit (check_reference_model).
EvalResult evaluate_model(const Qwen3Model& model, const Tokenizer& tokenizer, const Qwen3Model* reference,
                          const EvalOptions& options, const EvalProgressFn& progress = {});

// KL needs two distributions over the same tokens: Error naming both models when the reference's vocabulary, its
// shape (layers, hidden size, heads, ...) or its tokenizer (when it has one) differs from the model's. It compares
// versions of one model (an NVFP4 export and its BF16 source, a checkpoint and its base).
void check_reference_model(const Qwen3Model& model, const Tokenizer& tokenizer, const Qwen3Model& reference,
                           const Tokenizer* reference_tokenizer);

// {"model", "data", "format", "seq_len", "stride", "windows", "rows", "forward_tokens", "tokens", "loss",
//  "perplexity", "token_accuracy", "stopped_early", "seconds", "reference": {"model", "loss", "perplexity",
//  "token_accuracy", "kl_mean", "kl_median", "kl_p99", "kl_max", "top1_agreement", "perplexity_ratio"}}
nlohmann::json eval_result_json(const EvalResult& result);
// The same for people, a few lines.
std::string format_eval_result(const EvalResult& result);

}  // namespace nvfp4lm
