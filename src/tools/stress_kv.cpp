// run_stress_kv (stress_kv.h): one CaseRun per case, each with its own cache (and decode step), so a failure in one
// case cannot leak into the next.
#include "tools/stress_kv.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <memory>
#include <span>

#include "core/error.h"
#include "core/rng.h"
#include "core/stopwatch.h"
#include "tokenizer/chat.h"

namespace nvfp4lm {
namespace {

constexpr int64_t kMaxRowsPerAppend = 64;  // longer appends are checked at their last position only

constexpr std::array<const char*, 4> kChatQuestions = {"Hello! Who are you?", "What is 2 + 2?", "請用中文再說一次。",
                                                       "Thanks. One more short sentence?"};

class CaseRun {
 public:
  CaseRun(const Qwen3Model& model, const Tokenizer& tokenizer, const StressKvOptions& options, const StressCase& spec,
          uint64_t seed, double tolerance)
      : model_(model),
        tokenizer_(tokenizer),
        options_(options),
        spec_(spec),
        rng_(seed),
        tolerance_(tolerance),
        vocab_(model.config().vocab_size),
        candidates_(std::min<int64_t>(vocab_, static_cast<int64_t>(tokenizer.vocab_size()))) {
    result_.name = spec.name;
    result_.cache_tokens = spec.cache_tokens;
  }

  StressCaseResult run() {
    const auto start = Clock::now();
    try {
      cache_ = model_.make_cache(1, spec_.cache_tokens);
      if (options_.decode) step_ = std::make_unique<Qwen3DecodeStep>(model_, cache_, *options_.decode);
      for (const StressOp& op : spec_.ops) {
        if (!result_.pass()) break;
        apply(op);
        if (options_.after_op) options_.after_op(spec_, cache_);
      }
      if (result_.pass()) verify();
    } catch (const Error& e) {
      fail(fmt::format("error: {}", e.what()));
    }
    result_.final_tokens = static_cast<int64_t>(tokens_.size());
    result_.seconds = seconds_since(start);
    return result_;
  }

 private:
  void fail(std::string why) {
    if (result_.failure.empty()) result_.failure = std::move(why);
  }

  void apply(const StressOp& op) {
    switch (op.kind) {
      case StressOp::Kind::Append:
        append(random_ids(op.count));
        break;
      case StressOp::Kind::ChatTurn:
        append(next_turn());
        break;
      case StressOp::Kind::Decode:
        for (int64_t i = 0; i < op.count; ++i) decode_one();
        break;
      case StressOp::Kind::Rewind:
        NVFP4LM_ASSERT(op.count >= 0 && op.count <= static_cast<int64_t>(tokens_.size()),
                       "case '{}': rewind to {} of {} tokens", spec_.name, op.count, tokens_.size());
        verify();
        cache_.set_length(op.count);
        tokens_.resize(static_cast<size_t>(op.count));
        last_row_ = Tensor();  // the next greedy step has no logits to choose from: it feeds a random id
        break;
      case StressOp::Kind::Overflow:
        overflow(op.count);
        break;
    }
  }

  std::vector<int32_t> random_ids(int64_t count) {
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < count; ++i)
      ids.push_back(static_cast<int32_t>(rng_.next_u64() % static_cast<uint64_t>(candidates_)));
    return ids;
  }

  // The first turn opens the chat; later ones close the assistant's answer and ask the next question.
  std::vector<int32_t> next_turn() {
    const std::vector<ChatMessage> messages = {{"user", kChatQuestions[turn_ % kChatQuestions.size()]}};
    std::vector<int32_t> ids;
    if (turn_++ > 0) ids = tokenizer_.encode("<|im_end|>\n");
    const std::vector<int32_t> question =
        encode_generation_prompt(tokenizer_, ChatTemplate::resolve(tokenizer_), messages, false);
    ids.insert(ids.end(), question.begin(), question.end());
    return ids;
  }

  Tensor device_ids(std::span<const int32_t> ids) const {
    return Tensor::from_ints(std::vector<int32_t>(ids.begin(), ids.end()), Shape{1, static_cast<int64_t>(ids.size())})
        .to(model_.device());
  }

  void record(int64_t position, Tensor row) {
    pending_.push_back({position, row});
    last_row_ = std::move(row);
  }

  void append(const std::vector<int32_t>& ids) {
    const auto count = static_cast<int64_t>(ids.size());
    const bool all_rows = count <= kMaxRowsPerAppend;
    const Tensor logits = model_.forward_cached(device_ids(ids), cache_, all_rows).to(Device::cpu());
    const auto start = static_cast<int64_t>(tokens_.size());
    tokens_.insert(tokens_.end(), ids.begin(), ids.end());
    if (!all_rows) {
      record(start + count - 1, logits.reshape({vocab_}).clone());
      return;
    }
    const Tensor rows = logits.reshape({count, vocab_});
    for (int64_t i = 0; i < count; ++i) record(start + i, rows.select(0, i).clone());
  }

  // Runs one token through the decode path: the decode step when there is one, else forward_cached.
  Tensor feed_one(int32_t id) {
    const int32_t ids[1] = {id};
    const Tensor logits =
        step_ ? step_->run(ids)
              : model_.forward_cached(device_ids(ids), cache_, false, kNoLoraAdapter, Qwen3Model::Tokens::Generated);
    return logits.to(Device::cpu()).reshape({vocab_}).clone();
  }

  void decode_one() {
    int32_t id = 0;
    if (last_row_.defined()) {
      const float* row = last_row_.data<float>();
      id = static_cast<int32_t>(std::max_element(row, row + candidates_) - row);
    } else {
      id = random_ids(1).front();
    }
    Tensor row = feed_one(id);
    tokens_.push_back(id);
    record(static_cast<int64_t>(tokens_.size()) - 1, std::move(row));
  }

  void overflow(int64_t count) {
    const int64_t length = cache_.length();
    const std::vector<int32_t> ids = random_ids(count);
    bool refused = false;
    try {
      if (count == 1) {
        feed_one(ids.front());
      } else {
        model_.forward_cached(device_ids(ids), cache_);
      }
    } catch (const Error& e) {
      refused = std::string(e.what()).find("full") != std::string::npos;
      if (!refused)
        fail(fmt::format("{} tokens past the cache's room: the error does not say it is full: {}", count, e.what()));
    }
    if (!refused && result_.pass())
      fail(fmt::format("{} tokens fed to a cache of {} tokens holding {} were not refused", count, cache_.max_tokens(),
                       length));
    if (cache_.length() != length)
      fail(fmt::format("a refused append moved the cache's length from {} to {}", length, cache_.length()));
  }

  // Compares the rows produced since the sequence last changed with a full forward of the sequence.
  void verify() {
    if (pending_.empty()) return;
    int64_t first = pending_.front().position;
    for (const auto& observed : pending_) first = std::min(first, observed.position);
    const auto length = static_cast<int64_t>(tokens_.size());
    const Tensor reference =
        model_.forward_last(device_ids(tokens_), length - first).to(Device::cpu()).reshape({length - first, vocab_});
    const auto rows = static_cast<int64_t>(pending_.size());
    Tensor observed = Tensor::empty({rows, vocab_}, DType::F32), expected = Tensor::empty({rows, vocab_}, DType::F32);
    for (int64_t i = 0; i < rows; ++i) {
      const auto& [position, row] = pending_[static_cast<size_t>(i)];
      observed.select(0, i).copy_from(row);
      expected.select(0, i).copy_from(reference.select(0, position - first));
    }
    LogitDiff diff = compare_logits(observed, expected, candidates_);
    diff.max_diff_position = pending_[static_cast<size_t>(diff.max_diff_position)].position;
    if (diff.first_divergence >= 0)
      diff.first_divergence = pending_[static_cast<size_t>(diff.first_divergence)].position;
    result_.checked_rows += rows;
    if (diff.non_finite || diff.max_abs_diff >= result_.worst.max_abs_diff) {
      result_.worst = diff;
      result_.bound = diff.bound(tolerance_);
    }
    if (!diff.within(tolerance_)) {
      fail(diff.non_finite ? fmt::format("NaN or inf logits in {} rows of a {}-token sequence", rows, length)
                           : fmt::format("position {} of {}: max |Δlogit| {:.3g} > bound {:.3g}",
                                         diff.max_diff_position, length, diff.max_abs_diff, diff.bound(tolerance_)));
    }
    pending_.clear();
  }

  struct Observed {
    int64_t position;
    Tensor row;  // CPU F32 [V]
  };

  const Qwen3Model& model_;
  const Tokenizer& tokenizer_;
  const StressKvOptions& options_;
  const StressCase& spec_;
  Rng rng_;
  double tolerance_;
  int64_t vocab_, candidates_;
  KVCache cache_;
  std::unique_ptr<Qwen3DecodeStep> step_;  // refers to cache_
  std::vector<int32_t> tokens_;            // what the cache holds
  std::vector<Observed> pending_;
  Tensor last_row_;
  size_t turn_ = 0;
  StressCaseResult result_;
};

}  // namespace

int64_t StressKvReport::failed() const {
  return std::count_if(cases.begin(), cases.end(), [](const StressCaseResult& c) { return !c.pass(); });
}

StressKvReport run_stress_kv(const Qwen3Model& model, const Tokenizer& tokenizer, const StressKvOptions& options) {
  StressKvReport report;
  report.device = model.device().label();
  report.compute_path = model.compute_path();
  report.decode_path = !options.decode                        ? "forward_cached"
                       : *options.decode == DecodeMode::Graph ? "decode step replayed as a CUDA graph"
                                                              : "decode step, op by op";
  report.tolerance_class = model.device().is_cpu() ? ToleranceClass::Fp32 : ToleranceClass::Bf16Activations;
  report.tolerance = options.tolerances.of(report.tolerance_class);
  const int64_t context = model.config().max_position_embeddings;
  report.largest_cache = options.max_cache > 0 ? std::min(context, options.max_cache) : context;
  const std::vector<StressCase> cases = stress_kv_cases(context, options.full, options.max_cache);
  if (cases.empty()) {
    // Zero cases would "pass" having checked nothing: refuse, naming the smallest cache the matrix has.
    int64_t smallest = context;
    for (const StressCase& c : stress_kv_cases(context, options.full, 0)) smallest = std::min(smallest, c.cache_tokens);
    NVFP4LM_FAIL(
        "stress kv: no case of the matrix fits a cache of {} tokens (--max-cache {}, context {}); the "
        "smallest case needs {}: pass --max-cache {} or more",
        report.largest_cache, options.max_cache, context, smallest, smallest);
  }
  for (size_t i = 0; i < cases.size(); ++i)
    report.cases.push_back(CaseRun(model, tokenizer, options, cases[i], options.seed + i, report.tolerance).run());
  return report;
}

}  // namespace nvfp4lm
