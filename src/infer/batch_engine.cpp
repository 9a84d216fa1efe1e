// See batch_engine.h.
#include "infer/batch_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <span>

#include "core/error.h"
#include "core/memory.h"
#include "infer/constrain/grammar_constraint.h"

namespace nvfp4lm {

struct BatchEngine::Sequence {
  int64_t id = 0;
  int32_t slot = 0;
  int64_t prompt_tokens = 0;
  int64_t cached = 0;            // tokens in the slot's cache: the first `cached` of history
  std::vector<int32_t> history;  // prompt + chosen tokens (the repetition penalty sees all, presence and frequency
                                 // penalties the chosen ones)
  int top_logprobs = -1;
  bool entropy = false;
  int adapter = kNoLoraAdapter;
  Sampler sampler;
  AnswerStream answer;
  std::unique_ptr<TokenConstraint> constraint;  // SequenceSpec::grammar
  std::vector<float> masked;                    // the logits row with the constraint's mask

  Sequence(const Tokenizer& tokenizer, const SequenceSpec& spec, int64_t max_new, bool context_bound)
      : prompt_tokens(static_cast<int64_t>(spec.prompt.size())),
        history(spec.prompt),
        top_logprobs(spec.top_logprobs),
        entropy(spec.entropy),
        adapter(spec.adapter),
        sampler(spec.options.sampling),
        answer(tokenizer, spec.options, max_new, context_bound) {}

  bool prefilling() const { return cached < prompt_tokens; }
};

namespace {

constexpr int kMaxTopLogprobs = 20;  // the OpenAI API's limit

// The budget of a prompt of `prompt` tokens in a slot of `context`: the last generated token is never fed back,
// so context - prompt + 1 new tokens fit (as Generator caps it).
int64_t room_for(int64_t context, int64_t prompt) { return context - prompt + 1; }

int64_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  return std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(std::min(a.size(), b.size())), b.begin())
             .first -
         a.begin();
}

}  // namespace

BatchEngine::BatchEngine(const Qwen3Model& model, Tokenizer tokenizer, BatchEngineOptions options)
    : model_(model), tokenizer_(std::move(tokenizer)), options_(options) {
  NVFP4LM_CHECK(options_.slots >= 1, "the batch engine needs at least 1 slot, got {}", options_.slots);
  NVFP4LM_CHECK(options_.context >= 2, "the context per sequence must be at least 2 tokens, got {}", options_.context);
  const bool graphs = options_.decode == DecodeMode::Graph;
  pool_ = model_.make_cache(options_.slots + (graphs ? 1 : 0), options_.context);
  slot_state_.resize(static_cast<size_t>(options_.slots));
}

BatchEngine::~BatchEngine() = default;

uint64_t BatchEngine::slot_bytes(const Qwen3Config& config, int64_t context, DType dtype) {
  return 2 * static_cast<uint64_t>(config.num_hidden_layers) * static_cast<uint64_t>(context) *
         static_cast<uint64_t>(config.num_key_value_heads * config.head_dim) * dtype_bytes(dtype);
}

int64_t BatchEngine::slots_within_memory(const Qwen3Model& model, int64_t context, int64_t wanted) {
  const MemoryTracker& tracker = MemoryTracker::instance();
  const Device device = model.device();
  const size_t limit = tracker.limit_bytes(device);
  if (limit == 0) return wanted;
  const uint64_t slot = slot_bytes(model.config(), context, model.compute_dtype());
  const uint64_t used = tracker.current_bytes(device);
  const uint64_t available = limit > used ? limit - used : 0;
  // Work space besides the pool: one prefill as long as the context, and a decode step per batch size (eager steps
  // keep one each); it shrinks with the slot count, so take the most slots for which both fit.
  uint64_t work = model.forward_work_bytes(1, context);
  std::vector<uint64_t> work_for(static_cast<size_t>(wanted) + 1, work);
  for (int64_t rows = 1; rows <= wanted; ++rows)
    work_for[static_cast<size_t>(rows)] = work += model.forward_work_bytes(rows, 1);
  for (int64_t slots = wanted; slots >= 1; --slots)
    if (work_for[static_cast<size_t>(slots)] + static_cast<uint64_t>(slots) * slot <= available) return slots;
  NVFP4LM_FAIL(
      "--max-memory {:.3f} GiB leaves {:.3f} GiB after what is allocated ({:.3f} GiB, mostly weights), less than one "
      "KV-cache slot of {} tokens ({:.3f} GiB) with its work space ({:.3f} GiB); raise --max-memory or lower --context",
      to_gib(limit), to_gib(available), to_gib(used), context, to_gib(slot), to_gib(work_for[1]));
}

std::string BatchEngine::decode_path() const {
  if (options_.decode != DecodeMode::Graph) return "eager steps";
  std::string buckets;
  for (int64_t rows = 1;; rows = std::min(rows * 2, slots())) {
    buckets += (buckets.empty() ? "" : ", ") + std::to_string(rows);
    if (rows == slots()) break;
  }
  return fmt::format("CUDA graphs per batch bucket ({}), {} captured", buckets, steps_.size());
}

int64_t BatchEngine::bucket_for(int64_t running) const {
  if (options_.decode != DecodeMode::Graph) return running;
  return std::min(static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(running))), slots());
}

void BatchEngine::check(const SequenceSpec& spec) const {
  const auto prompt = static_cast<int64_t>(spec.prompt.size());
  NVFP4LM_CHECK(prompt > 0, "the prompt is empty: there is nothing to continue from");
  NVFP4LM_CHECK(prompt <= context(), "the prompt has {} tokens but the context per sequence is {} tokens; shorten it",
                prompt, context());
  NVFP4LM_CHECK(spec.options.max_new_tokens > 0, "max tokens must be positive, got {}", spec.options.max_new_tokens);
  NVFP4LM_CHECK(spec.top_logprobs >= -1 && spec.top_logprobs <= kMaxTopLogprobs,
                "top logprobs must be between 0 and {}, got {}", kMaxTopLogprobs, spec.top_logprobs);
  spec.options.sampling.validate();
  for (const auto& stop : spec.options.stop_strings) NVFP4LM_CHECK(!stop.empty(), "a stop string must not be empty");
  model_.check_adapter(spec.adapter);
  const int64_t vocab = std::min<int64_t>(model_.config().vocab_size, static_cast<int64_t>(tokenizer_.vocab_size()));
  for (int32_t id : spec.prompt)
    NVFP4LM_CHECK(id >= 0 && id < vocab, "prompt token id {} is outside the vocabulary [0, {})", id, vocab);
  // Checked here, not at the first step: a bad id would end the sequence mid-answer.
  for (const auto& entry : spec.options.sampling.logit_bias)
    NVFP4LM_CHECK(entry.first < vocab, "logit_bias token id {} is outside the vocabulary [0, {})", entry.first, vocab);
  if (spec.grammar) {
    const int64_t budget = std::min(spec.options.max_new_tokens, room_for(context(), prompt));
    const int32_t needed = constrain::min_tokens(*spec.grammar);
    NVFP4LM_CHECK(needed <= budget,
                  "the response format's shortest answer takes {} tokens but the answer may have only {}; raise max "
                  "tokens (or shorten the prompt)",
                  needed, budget);
  }
}

int64_t BatchEngine::prefilling() const {
  return std::count_if(sequences_.begin(), sequences_.end(),
                       [](const auto& sequence) { return sequence->prefilling(); });
}

int64_t BatchEngine::cached_tokens() const {
  int64_t tokens = 0;
  for (const auto& sequence : sequences_) tokens += sequence->cached;
  return tokens;
}

std::pair<int32_t, int64_t> BatchEngine::choose_slot(const std::vector<int32_t>& prompt, int adapter) const {
  int32_t best = -1;
  int64_t best_common = -1;
  for (size_t i = 0; i < slot_state_.size(); ++i) {
    const Slot& slot = slot_state_[i];
    if (slot.used) continue;
    if (!options_.prefix_cache) return {static_cast<int32_t>(i), 0};  // the first free one
    const int64_t common = slot.adapter == adapter ? common_prefix(slot.tokens, prompt) : 0;
    if (common > best_common ||
        (common == best_common && slot.released_at < slot_state_[static_cast<size_t>(best)].released_at)) {
      best = static_cast<int32_t>(i);
      best_common = common;
    }
  }
  NVFP4LM_ASSERT(best >= 0, "no free KV-cache slot");
  // The last prompt token is computed even when the slot holds it: its logits choose the first token.
  return {best, std::min(best_common, static_cast<int64_t>(prompt.size()) - 1)};
}

int64_t BatchEngine::copy_running_prefix(const std::vector<int32_t>& prompt, int adapter, int32_t slot, int64_t held) {
  if (!options_.prefix_cache) return 0;
  const Sequence* source = nullptr;
  int64_t best = held;
  for (const auto& sequence : sequences_) {
    if (sequence->adapter != adapter) continue;
    // Only prompt positions: their K/V are what a prefill of this prompt computes (see the top).
    const int64_t computed = std::min(sequence->cached, sequence->prompt_tokens);
    const int64_t common =
        common_prefix(std::span<const int32_t>(sequence->history).first(static_cast<size_t>(computed)), prompt);
    if (common > best) {
      best = common;
      source = sequence.get();
    }
  }
  // The last prompt token is computed even when shared: its logits choose the first token.
  best = std::min(best, static_cast<int64_t>(prompt.size()) - 1);
  if (source == nullptr || best <= held) return 0;
  for (int layer = 0; layer < model_.config().num_hidden_layers; ++layer) {
    for (Tensor* cache : {&pool_.keys(layer), &pool_.values(layer)}) {
      const Tensor from = cache->narrow(0, source->slot, 1).narrow(1, 0, best);
      cache->narrow(0, slot, 1).narrow(1, 0, best).copy_from(from);
    }
  }
  return best;
}

int64_t BatchEngine::begin(SequenceSpec spec) {
  check(spec);
  NVFP4LM_CHECK(has_free_slot(), "all {} KV-cache slots are busy", slots());
  const auto prompt = static_cast<int64_t>(spec.prompt.size());
  const int64_t room = room_for(context(), prompt);
  const bool context_bound = spec.options.max_new_tokens > room;
  auto sequence =
      std::make_unique<Sequence>(tokenizer_, spec, std::min(spec.options.max_new_tokens, room), context_bound);
  if (spec.grammar)
    sequence->constraint =
        std::make_unique<constrain::GrammarConstraint>(spec.grammar, token_trie(), spec.options.eos_ids);
  const auto [slot, held] = choose_slot(spec.prompt, spec.adapter);
  const int64_t reused = std::max(held, copy_running_prefix(spec.prompt, spec.adapter, slot, held));
  sequence->id = next_id_++;
  sequence->slot = slot;
  sequence->cached = reused;
  Slot& state = slot_state_[static_cast<size_t>(slot)];
  state.used = true;
  state.tokens.clear();  // rewritten from `reused` on; release() says what it holds then
  state.adapter = spec.adapter;
  last_reused_tokens_ = reused;
  sequences_.push_back(std::move(sequence));
  return sequences_.back()->id;
}

int64_t BatchEngine::start(SequenceSpec spec, const SequenceEventSink& sink) {
  const int64_t id = begin(std::move(spec));
  prefill_chunk(sequences_.size() - 1, 0, sink);
  return id;
}

int64_t BatchEngine::next_prefill() const {
  for (const auto& sequence : sequences_)
    if (sequence->prefilling()) return sequence->id;
  return 0;
}

int64_t BatchEngine::prefill(int64_t max_tokens, const SequenceEventSink& sink) {
  for (size_t i = 0; i < sequences_.size(); ++i)
    if (sequences_[i]->prefilling()) return prefill_chunk(i, max_tokens, sink);
  return 0;
}

int64_t BatchEngine::prefill_chunk(size_t index, int64_t max_tokens, const SequenceEventSink& sink) {
  Sequence& sequence = *sequences_[index];
  const int64_t rest = sequence.prompt_tokens - sequence.cached;
  const int64_t tokens = max_tokens > 0 ? std::min(max_tokens, rest) : rest;
  try {
    KVCache view = pool_.row_view(sequence.slot);
    view.set_length(sequence.cached);  // forward_cached appends here, at positions from here on
    const auto first = sequence.history.begin() + static_cast<std::ptrdiff_t>(sequence.cached);
    const Tensor ids = Tensor::from_ints(std::vector<int32_t>(first, first + tokens), Shape{1, tokens});
    Tensor logits = model_.forward_cached(ids, view, /*all_logits=*/false, sequence.adapter);
    sequence.cached += tokens;
    if (sequence.prefilling()) return tokens;
    logits = logits.to(Device::cpu()).contiguous();
    choose(sequence, {logits.data<float>(), static_cast<size_t>(logits.numel())}, sink);
  } catch (...) {
    release(index, /*keep_cache=*/false);
    throw;
  }
  if (sequence.answer.finished()) release(index);
  return tokens;
}

Qwen3DecodeStep& BatchEngine::decode_step(int64_t rows) {
  auto& step = steps_[rows];
  if (!step) step = std::make_unique<Qwen3DecodeStep>(model_, pool_, options_.decode.value_or(DecodeMode::Eager), rows);
  return *step;
}

const std::shared_ptr<const constrain::TokenTrie>& BatchEngine::token_trie() {
  if (!token_trie_) token_trie_ = constrain::TokenTrie::from_tokenizer(tokenizer_);
  return token_trie_;
}

void BatchEngine::step(const SequenceEventSink& sink) {
  std::vector<Sequence*> decoding;  // the rows, in start order
  for (const auto& sequence : sequences_)
    if (!sequence->prefilling()) decoding.push_back(sequence.get());
  const auto running = static_cast<int64_t>(decoding.size());
  if (running == 0) return;
  const int64_t bucket = bucket_for(running);
  std::vector<DecodeRow> rows(static_cast<size_t>(bucket));
  for (int64_t i = 0; i < running; ++i) {
    const Sequence& sequence = *decoding[static_cast<size_t>(i)];
    rows[static_cast<size_t>(i)] = {sequence.history.back(), static_cast<int32_t>(sequence.cached), sequence.slot,
                                    sequence.adapter};
  }
  // Padding rows (graph buckets) write the spare slot, at distinct positions while the context has room (their
  // results are dropped; a shared position would only make a padding row's own output depend on the order).
  for (int64_t i = running; i < bucket; ++i)
    rows[static_cast<size_t>(i)] = {0, static_cast<int32_t>((i - running) % context()), static_cast<int32_t>(slots())};

  const Tensor logits = decode_step(bucket).run_rows(rows).narrow(0, 0, running).to(Device::cpu()).contiguous();
  const auto vocab = static_cast<size_t>(logits.dim(1));
  for (int64_t i = 0; i < running; ++i) {
    Sequence& sequence = *decoding[static_cast<size_t>(i)];
    ++sequence.cached;
    choose(sequence, {logits.data<float>() + static_cast<size_t>(i) * vocab, vocab}, sink);
  }
  for (size_t i = sequences_.size(); i-- > 0;)
    if (sequences_[i]->answer.finished()) release(i);
}

void BatchEngine::choose(Sequence& sequence, std::span<const float> logits, const SequenceEventSink& sink) {
  const size_t decodable = std::min(logits.size(), tokenizer_.vocab_size());
  SequenceEvent event;
  event.sequence = sequence.id;
  const std::span<const int32_t> history(sequence.history);
  std::span<const float> row = logits;
  if (sequence.constraint) {
    // The mask comes first: bias, penalties, temperature and the top-k/p cuts then see only allowed tokens.
    sequence.masked.assign(logits.begin(), logits.end());
    sequence.constraint->mask_logits(sequence.masked, sequence.answer.max_new_tokens() - sequence.answer.tokens());
    row = sequence.masked;
  }
  event.token = sequence.sampler.sample_decodable(row, decodable, history,
                                                  history.subspan(static_cast<size_t>(sequence.prompt_tokens)));
  // A draw within rounding of 1 may land past the last token of nonzero probability (Sampler::sample): take the
  // best allowed one then.
  if (sequence.constraint && row[static_cast<size_t>(event.token)] == -std::numeric_limits<float>::infinity())
    event.token = argmax_logit(row.first(decodable));
  if (sequence.top_logprobs >= 0)
    event.logprobs = next_token_logprobs(logits, static_cast<int64_t>(decodable), event.token, sequence.top_logprobs);
  if (sequence.entropy)
    event.entropy = next_token_entropy(logits, static_cast<int64_t>(decodable), sequence.sampler.options().temperature);
  if (sequence.constraint) {
    const bool accepted = sequence.constraint->accept(event.token);
    NVFP4LM_ASSERT(accepted, "the constraint refused token {}, which it allowed", event.token);
  }
  event.text = sequence.constraint && sequence.constraint->closed() ? sequence.answer.push_last(event.token)
                                                                    : sequence.answer.push(event.token);
  sequence.history.push_back(event.token);
  event.finished = sequence.answer.finished();
  event.stop_reason = sequence.answer.stop_reason();
  event.stop_detail = sequence.answer.stop_detail();
  event.prompt_tokens = sequence.prompt_tokens;
  event.generated_tokens = sequence.answer.tokens();
  if (sink) sink(event);
}

void BatchEngine::release(size_t index, bool keep_cache) {
  const Sequence& sequence = *sequences_[index];
  Slot& slot = slot_state_[static_cast<size_t>(sequence.slot)];
  slot.used = false;
  slot.released_at = ++releases_;
  slot.tokens.clear();
  // The K/V of generated tokens come from the decode kernels; a prompt that repeats them is computed by the prefill
  // kernels, so only the prompt's positions are kept unless the caller accepts the difference (see the top).
  const int64_t kept = options_.reuse_answers ? sequence.cached : std::min(sequence.cached, sequence.prompt_tokens);
  if (options_.prefix_cache && keep_cache)
    slot.tokens.assign(sequence.history.begin(), sequence.history.begin() + static_cast<std::ptrdiff_t>(kept));
  sequences_.erase(sequences_.begin() + static_cast<std::ptrdiff_t>(index));
}

void BatchEngine::cancel(int64_t sequence) {
  for (size_t i = 0; i < sequences_.size(); ++i) {
    if (sequences_[i]->id == sequence) {
      release(i);
      return;
    }
  }
}

}  // namespace nvfp4lm
