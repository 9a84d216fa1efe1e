// GrammarConstraint: a TokenConstraint (infer/token_constraint.h) that keeps a sequence's text inside a grammar
// (grammar.h) — a JSON value of a schema, a framed tool call — and makes it end within its token budget.
//
// The allowed tokens of a state: every token whose bytes the matcher (grammar_matcher.h) can take from that state,
// found by one pass over the vocabulary's prefix tree (token_trie.h) with a matcher state per depth; plus the
// end-of-sequence tokens once the text is complete. Special tokens are never allowed otherwise.
//
// Budget: with R tokens left (this one included) a token is allowed only when the state after it can still end
// within R - 1 tokens (GrammarMatcher::min_tokens_to_end: the fewest bytes to a complete text, plus an end token if
// one is needed). Every byte is a token of a byte-level BPE vocabulary, so from any state reached this way the
// shortest completion stays possible byte by byte: an answer that starts with R >= min_tokens_to_end(start) always
// ends complete, at temperature 1 with a random model too. A budget below that is refused up front (min_tokens()).
//
// Cost: the pass visits the prefix tree's nodes below the bytes the state allows (inside a string: nearly all of
// Qwen3's ~151k tokens; between keys: a handful), one memoized table lookup each. The mask of a state is kept (a
// few dozen states per sequence) while the budget cannot bind any of its tokens, so the repeated states of a long
// string or array cost a copy. bench/NOTES.md (2026-11-28) has the numbers.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "infer/constrain/grammar.h"
#include "infer/constrain/grammar_matcher.h"
#include "infer/constrain/token_trie.h"
#include "infer/token_constraint.h"

namespace nvfp4lm::constrain {

class GrammarConstraint final : public TokenConstraint {
 public:
  // eos_ids: the tokens that end a complete text (stop_conditions.h end_of_sequence_ids).
  GrammarConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                    std::vector<int32_t> eos_ids);

  // The allowed next tokens as a bitset over the trie's vocabulary (bit id % 64 of word id / 64). Valid until the
  // next call.
  const std::vector<uint64_t>& allowed_tokens(int64_t remaining_tokens);
  bool allowed(int32_t token, int64_t remaining_tokens);

  void mask_logits(std::span<float> logits, int64_t remaining_tokens) override;
  bool accept(int32_t token) override;
  bool closed() const override { return ended_ || matcher_.closed(state_); }
  // The text so far is a complete match.
  bool complete() const { return ended_ || matcher_.complete(state_); }
  // Drops the kept masks (the matcher's memo stays): the next allowed_tokens() walks the prefix tree (benchmarks).
  void forget_masks() { cache_.clear(); }
  // The fewest tokens that still end the text (0 once closed).
  int32_t min_tokens_to_end() const { return ended_ ? 0 : matcher_.min_tokens_to_end(state_); }

 private:
  struct CachedMask {
    std::vector<uint64_t> bits;
    int32_t max_cost = 0;  // the largest min_tokens_to_end after an allowed token: the budget it needs
  };
  bool is_eos(int32_t token) const;
  void compute(int64_t remaining_tokens, std::vector<uint64_t>& bits, int32_t& max_cost);

  GrammarMatcher matcher_;
  std::shared_ptr<const TokenTrie> trie_;
  std::vector<int32_t> eos_ids_;  // sorted
  GrammarMatcher::StateId state_;
  bool ended_ = false;  // an end-of-sequence token was accepted
  std::vector<GrammarMatcher::StateId> depth_states_;
  std::unordered_map<GrammarMatcher::StateId, CachedMask> cache_;
  std::vector<uint64_t> bits_;
};

// The fewest tokens any text of `grammar` takes (its shortest value, plus an end token when it needs one): a budget
// below it cannot be met.
int32_t min_tokens(const Grammar& grammar);

}  // namespace nvfp4lm::constrain
