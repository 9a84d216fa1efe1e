// See grammar_constraint.h.
#include "infer/constrain/grammar_constraint.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace nvfp4lm::constrain {
namespace {

constexpr size_t kMaxMatcherStates = 8192;  // memoized matcher states kept per sequence (~1 KiB each)
constexpr size_t kMaxCachedMasks = 32;      // states whose masks are kept (~19 KiB each for Qwen3)

void set_bit(std::vector<uint64_t>& bits, int32_t id) {
  bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (static_cast<size_t>(id) & 63);
}
bool test_bit(const std::vector<uint64_t>& bits, int32_t id) {
  return (bits[static_cast<size_t>(id) >> 6] >> (static_cast<size_t>(id) & 63)) & 1;
}

}  // namespace

int32_t min_tokens(const Grammar& grammar) {
  const int32_t bytes = grammar.min_bytes();
  return bytes == std::numeric_limits<int32_t>::max() ? bytes : bytes + (grammar.needs_end_token() ? 1 : 0);
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                                     std::vector<int32_t> eos_ids)
    : matcher_(std::move(grammar)), trie_(std::move(trie)), eos_ids_(std::move(eos_ids)) {
  NVFP4LM_ASSERT(trie_ != nullptr, "GrammarConstraint without a vocabulary");
  std::sort(eos_ids_.begin(), eos_ids_.end());
  state_ = matcher_.start();
  depth_states_.resize(static_cast<size_t>(trie_->max_depth()) + 1);
}

bool GrammarConstraint::is_eos(int32_t token) const {
  return std::binary_search(eos_ids_.begin(), eos_ids_.end(), token);
}

void GrammarConstraint::compute(int64_t remaining_tokens, std::vector<uint64_t>& bits, int32_t& max_cost) {
  const size_t vocab = trie_->vocab_size();
  bits.assign((vocab + 63) / 64, 0);
  max_cost = 0;
  const std::span<const TokenTrie::Node> nodes = trie_->nodes();
  depth_states_[0] = state_;
  for (size_t i = 0; i < nodes.size();) {
    const TokenTrie::Node& node = nodes[i];
    const GrammarMatcher::StateId next =
        matcher_.advance(depth_states_[static_cast<size_t>(node.depth - 1)], node.byte);
    if (next == GrammarMatcher::kDead) {
      i = static_cast<size_t>(node.subtree_end);
      continue;
    }
    depth_states_[static_cast<size_t>(node.depth)] = next;
    if (node.tokens_end > node.tokens_begin) {
      const int32_t cost = matcher_.min_tokens_to_end(next);
      max_cost = std::max(max_cost, cost);
      if (cost <= remaining_tokens - 1)
        for (int32_t id : trie_->tokens_at(node)) set_bit(bits, id);
    }
    ++i;
  }
  if (matcher_.complete(state_))
    for (int32_t id : eos_ids_)
      if (static_cast<size_t>(id) < vocab) set_bit(bits, id);
}

const std::vector<uint64_t>& GrammarConstraint::allowed_tokens(int64_t remaining_tokens) {
  if (ended_) {
    bits_.assign((trie_->vocab_size() + 63) / 64, 0);
    return bits_;
  }
  const GrammarMatcher::StateId compacted = matcher_.compact(state_, kMaxMatcherStates);
  if (compacted != state_) cache_.clear();  // state ids were renumbered
  state_ = compacted;
  if (const auto found = cache_.find(state_); found != cache_.end() && found->second.max_cost <= remaining_tokens - 1)
    return found->second.bits;
  int32_t max_cost = 0;
  compute(remaining_tokens, bits_, max_cost);
  // A mask the budget did not cut holds for any budget at least as large.
  if (max_cost <= remaining_tokens - 1) {
    if (cache_.size() >= kMaxCachedMasks) cache_.clear();
    cache_[state_] = {bits_, max_cost};
  }
  return bits_;
}

bool GrammarConstraint::allowed(int32_t token, int64_t remaining_tokens) {
  return token >= 0 && static_cast<size_t>(token) < trie_->vocab_size() &&
         test_bit(allowed_tokens(remaining_tokens), token);
}

void GrammarConstraint::mask_logits(std::span<float> logits, int64_t remaining_tokens) {
  const std::vector<uint64_t>& bits = allowed_tokens(remaining_tokens);
  const size_t vocab = std::min(logits.size(), trie_->vocab_size());
  constexpr float kBanned = -std::numeric_limits<float>::infinity();
  for (size_t word = 0; word * 64 < vocab; ++word) {
    const uint64_t allowed = bits[word];
    if (allowed == ~uint64_t{0}) continue;
    const size_t end = std::min(vocab, word * 64 + 64);
    for (size_t id = word * 64; id < end; ++id)
      if (!((allowed >> (id & 63)) & 1)) logits[id] = kBanned;
  }
  // Rows past the vocabulary (a padded embedding table) are never tokens.
  std::fill(logits.begin() + static_cast<std::ptrdiff_t>(vocab), logits.end(), kBanned);
}

bool GrammarConstraint::accept(int32_t token) {
  if (ended_ || token < 0 || static_cast<size_t>(token) >= trie_->vocab_size()) return false;
  if (is_eos(token)) {
    if (!matcher_.complete(state_)) return false;
    ended_ = true;
    return true;
  }
  const std::string& bytes = trie_->token_bytes(token);
  if (bytes.empty()) return false;  // a special token or an unused id
  const GrammarMatcher::StateId next = matcher_.advance(state_, bytes);
  if (next == GrammarMatcher::kDead) return false;
  state_ = next;
  return true;
}

}  // namespace nvfp4lm::constrain
