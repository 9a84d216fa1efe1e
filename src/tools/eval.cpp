// See eval.h.
#include "tools/eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "data/batch.h"
#include "data/eval_windows.h"
#include "tokenizer/chat_template.h"
#include "tools/token_scores.h"

namespace nvfp4lm {
namespace {

using json = nlohmann::json;

double perplexity_of(double loss) { return std::exp(loss); }

// Runs one row and adds its scores. Logits come back to the host as F32 [1, T, V].
void score_row_batch(const Qwen3Model& model, const Qwen3Model* reference, const TokenBatch& batch, int adapter,
                     ScoreTotals& totals) {
  const Tensor logits = model.forward(batch.ids, &batch.positions, &batch.segment_ids, adapter).to(Device::cpu());
  Tensor reference_logits;
  if (reference != nullptr)
    reference_logits = reference->forward(batch.ids, &batch.positions, &batch.segment_ids).to(Device::cpu());
  const int64_t rows = batch.ids.numel(), vocab = model.config().vocab_size;
  add_row_scores(logits.contiguous().data<float>(),
                 reference != nullptr ? reference_logits.contiguous().data<float>() : nullptr, rows, vocab,
                 batch.targets.data<int32_t>(), totals);
}

// The ids a probe text encodes to: two tokenizers that agree on it (and on their size) are taken as the same.
std::vector<int32_t> probe_ids(const Tokenizer& tokenizer) {
  return tokenizer.encode("The quick brown fox, 2024: 你好，世界！\n\tx = f(y) <|im_start|>user");
}

}  // namespace

void check_reference_model(const Qwen3Model& model, const Tokenizer& tokenizer, const Qwen3Model& reference,
                           const Tokenizer* reference_tokenizer) {
  const Qwen3Config& m = model.config();
  const Qwen3Config& r = reference.config();
  const std::string model_name = model.source().string(), reference_name = reference.source().string();
  NVFP4LM_CHECK(m.vocab_size == r.vocab_size,
                "--reference {} has a vocabulary of {} tokens but the model {} has {}: KL compares two distributions "
                "over the same tokens; give a version of the same model (e.g. the BF16 source of an NVFP4 export)",
                reference_name, r.vocab_size, model_name, m.vocab_size);
  auto shape = [](const Qwen3Config& c) {
    return fmt::format("{} layers, hidden {}, intermediate {}, {} heads / {} kv heads of {}", c.num_hidden_layers,
                       c.hidden_size, c.intermediate_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim);
  };
  NVFP4LM_CHECK(shape(m) == shape(r),
                "--reference {} has another shape ({}) than the model {} ({}): eval --reference compares versions of "
                "one model (an export and its source, a fine-tune and its base); give one of the same shape",
                reference_name, shape(r), model_name, shape(m));
  if (reference_tokenizer == nullptr) return;
  NVFP4LM_CHECK(reference_tokenizer->vocab_size() == tokenizer.vocab_size() &&
                    probe_ids(*reference_tokenizer) == probe_ids(tokenizer),
                "--reference {} has another tokenizer ({}, {} tokens) than the model {} ({}, {} tokens): the same ids "
                "would mean other text; give a reference with the model's tokenizer",
                reference_name, reference_tokenizer->origin(), reference_tokenizer->vocab_size(), model_name,
                tokenizer.origin(), tokenizer.vocab_size());
}

EvalResult evaluate_model(const Qwen3Model& model, const Tokenizer& tokenizer, const Qwen3Model* reference,
                          const EvalOptions& options, const EvalProgressFn& progress) {
  const auto start = std::chrono::steady_clock::now();
  const Qwen3Config& config = model.config();
  const int64_t context = config.max_position_embeddings;
  EvalResult result;
  result.model = model.source().string();
  result.seq_len = options.seq_len > 0 ? options.seq_len : std::min(kDefaultEvalSeqLen, context);
  NVFP4LM_CHECK(result.seq_len <= context,
                "--seq-len {} is longer than the context of {} ({} tokens, max_position_embeddings); use at most that",
                result.seq_len, result.model, context);
  NVFP4LM_CHECK(result.seq_len >= 2, "--seq-len {} is too short: a window needs at least 2 tokens", result.seq_len);
  result.stride = options.stride > 0 ? options.stride : std::max<int64_t>(1, result.seq_len / 2);
  check_tokenizer_fits_model(tokenizer, config.vocab_size, result.model);

  DatasetOptions data_options;
  data_options.format = options.data_format;
  data_options.pair_template = options.data_template;
  data_options.chat_template = ChatTemplate::resolve(tokenizer, options.chat_template);
  data_options.train_on_everything = options.score_everything;
  data_options.goal = "evaluate";
  Dataset dataset = read_dataset(options.data, tokenizer, data_options);
  result.data = dataset.summary;

  EvalWindowOptions window_options;
  window_options.seq_len = result.seq_len;
  window_options.stride = result.stride;
  window_options.max_scored_tokens = options.max_tokens;
  const EvalWindows windows = make_eval_windows(dataset.samples, window_options);
  dataset.samples.clear();
  NVFP4LM_CHECK(windows.scored_tokens > 0, "dataset {}: no token to evaluate", options.data.string());
  result.windows = static_cast<int64_t>(windows.windows.size());
  result.long_samples = windows.long_samples;
  result.stopped_early = windows.stopped_early;

  // Rows: windows packed in order into rows of seq_len tokens, each row exactly as long as what it holds.
  std::vector<int64_t> order(windows.windows.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::vector<std::vector<int64_t>> rows;
  for (size_t next = 0; next < order.size();) next = pack_rows(windows.windows, order, next, result.seq_len, 1, rows);
  result.rows = static_cast<int64_t>(rows.size());

  ScoreTotals totals;
  EvalProgress state;
  state.rows_total = result.rows;
  state.tokens_total = windows.scored_tokens;
  for (const std::vector<int64_t>& row : rows) {
    int64_t row_tokens = 0;
    for (int64_t index : row)
      row_tokens += static_cast<int64_t>(windows.windows[static_cast<size_t>(index)].ids.size());
    const TokenBatch batch = assemble_batch(windows.windows, {row}, row_tokens, /*pad_id=*/0);
    score_row_batch(model, reference, batch, options.adapter, totals);
    result.forward_tokens += row_tokens;
    ++state.rows_done;
    state.tokens_done = totals.tokens;
    state.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (progress) progress(state);
  }
  NVFP4LM_ASSERT(totals.tokens == windows.scored_tokens, "scored {} tokens, the windows hold {}", totals.tokens,
                 windows.scored_tokens);

  const auto tokens = static_cast<double>(totals.tokens);
  result.tokens = totals.tokens;
  result.loss = totals.loss_sum / tokens;
  result.perplexity = perplexity_of(result.loss);
  result.token_accuracy = static_cast<double>(totals.correct) / tokens;
  if (reference != nullptr) {
    EvalReferenceResult& r = result.reference.emplace();
    r.model = reference->source().string();
    r.loss = totals.reference_loss_sum / tokens;
    r.perplexity = perplexity_of(r.loss);
    r.token_accuracy = static_cast<double>(totals.reference_correct) / tokens;
    r.kl_mean = totals.kl_sum / tokens;
    r.kl_median = quantile(totals.kl_values, 0.5);
    r.kl_p99 = quantile(totals.kl_values, 0.99);
    r.kl_max = quantile(totals.kl_values, 1.0);
    r.top1_agreement = static_cast<double>(totals.top1_agreement) / tokens;
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

json eval_result_json(const EvalResult& r) {
  json out = {{"model", r.model},
              {"data", r.data.path.string()},
              {"format", std::string(data_format_name(r.data.format))},
              {"samples", r.data.samples},
              {"seq_len", r.seq_len},
              {"stride", r.stride},
              {"windows", r.windows},
              {"rows", r.rows},
              {"forward_tokens", r.forward_tokens},
              {"tokens", r.tokens},
              {"loss", r.loss},
              {"perplexity", r.perplexity},
              {"token_accuracy", r.token_accuracy},
              {"stopped_early", r.stopped_early},
              {"seconds", r.seconds}};
  if (r.reference) {
    const EvalReferenceResult& ref = *r.reference;
    out["reference"] = {{"model", ref.model},
                        {"loss", ref.loss},
                        {"perplexity", ref.perplexity},
                        {"token_accuracy", ref.token_accuracy},
                        {"kl_mean", ref.kl_mean},
                        {"kl_median", ref.kl_median},
                        {"kl_p99", ref.kl_p99},
                        {"kl_max", ref.kl_max},
                        {"top1_agreement", ref.top1_agreement},
                        {"perplexity_ratio", r.perplexity / ref.perplexity}};
  }
  return out;
}

std::string format_eval_result(const EvalResult& r) {
  std::string text = fmt::format(
      "data {} ({}): {} samples -> {} windows of at most {} tokens (stride {}, {} longer samples read by sliding "
      "windows), {} rows, {} tokens run{}\n",
      r.data.path.string(), data_format_name(r.data.format), r.data.samples, r.windows, r.seq_len, r.stride,
      r.long_samples, r.rows, r.forward_tokens, r.stopped_early ? " (stopped at --max-tokens)" : "");
  text += fmt::format("tokens scored   {}\n", r.tokens);
  text += fmt::format("mean loss       {:.6f} nats/token\n", r.loss);
  text += fmt::format("perplexity      {:.4f}\n", r.perplexity);
  text += fmt::format("token accuracy  {:.2f}%\n", 100.0 * r.token_accuracy);
  if (r.reference) {
    const EvalReferenceResult& ref = *r.reference;
    text += fmt::format("reference       {}: loss {:.6f}, perplexity {:.4f}, token accuracy {:.2f}%\n", ref.model,
                        ref.loss, ref.perplexity, 100.0 * ref.token_accuracy);
    text += fmt::format("perplexity ratio {:.6f} (model / reference)\n", r.perplexity / ref.perplexity);
    text += fmt::format("KL(reference || model) mean {:.6g}, median {:.6g}, p99 {:.6g}, max {:.6g} nats/token\n",
                        ref.kl_mean, ref.kl_median, ref.kl_p99, ref.kl_max);
    text += fmt::format("top-1 agreement {:.2f}%\n", 100.0 * ref.top1_agreement);
  }
  text += fmt::format("time {:.2f} s ({:.0f} tokens/s run)\n", r.seconds,
                      r.seconds > 0 ? static_cast<double>(r.forward_tokens) / r.seconds : 0.0);
  return text;
}

}  // namespace nvfp4lm
