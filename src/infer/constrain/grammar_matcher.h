// GrammarMatcher: a grammar (grammar.h) run over bytes as a pushdown automaton whose states are memoized, so that
// walking the vocabulary's prefix tree (token_mask.h) costs one table lookup per byte once a state has been seen.
//
// A position in the grammar is a stack of frames, each the element still to match in one alternative, innermost on
// top. Stacks share their tails (a frame is a node pointing to the frame below it), and nodes are interned, so equal
// stacks are one node id. A matcher state is the set of stacks the text so far can be in (the grammar may be
// ambiguous for a few bytes: two optional properties whose names share a prefix), each expanded until its top is a
// byte set; the empty stack (kDone) means the text is a complete match. States are interned too: equal sets are one
// state id, and each state keeps its 256 transitions once computed (kDead: the byte is not allowed).
//
// Each node also knows the bytes still needed to empty its stack (the sum of Grammar::rest_bytes over its frames),
// so a state knows the fewest bytes — and, as every byte is a token of a byte-level BPE vocabulary, the fewest
// tokens — that still complete the value (min_tokens_to_end).
//
// Memory grows with the states visited, which a JSON grammar keeps small (the same few states recur inside a string
// or a number); compact() drops the memo but the current state when it grows past a limit.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "infer/constrain/grammar.h"

namespace nvfp4lm::constrain {

class GrammarMatcher {
 public:
  using StateId = int32_t;
  static constexpr StateId kDead = -1;

  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);

  const Grammar& grammar() const { return *grammar_; }
  StateId start() const { return start_; }
  // The state after `byte`, or kDead when the text cannot continue with it.
  StateId advance(StateId state, uint8_t byte) {
    const int32_t next = transitions_[static_cast<size_t>(state) * 256 + byte];
    return next != kUnknown ? next : compute_transition(state, byte);
  }
  StateId advance(StateId state, std::string_view bytes);

  // The text is a complete match (it may still go on when not closed()).
  bool complete(StateId state) const { return states_[static_cast<size_t>(state)].complete; }
  // Complete, and no byte may follow.
  bool closed(StateId state) const { return states_[static_cast<size_t>(state)].closed; }
  // The fewest tokens that still end the text: the bytes to complete it, plus one end-of-sequence token when the
  // grammar needs one (Grammar::needs_end_token); 1 for a complete text that could go on, 0 for a closed one.
  int32_t min_tokens_to_end(StateId state) const { return states_[static_cast<size_t>(state)].min_tokens; }

  size_t state_count() const { return states_.size(); }
  // When more than `max_states` states are memoized, forgets all but `keep` (renumbered: the new id is returned).
  StateId compact(StateId keep, size_t max_states);

 private:
  static constexpr int32_t kUnknown = -2;
  static constexpr int32_t kDone = 0;  // node id of the empty stack
  struct Node {
    int32_t element = 0;  // the next element to match in this frame
    int32_t parent = kDone;
    int32_t bytes_to_end = 0;  // bytes that empty the whole stack
  };
  struct State {
    size_t heads_begin = 0, heads_end = 0;  // into heads_
    bool complete = false;
    bool closed = false;
    int32_t min_tokens = 0;
  };

  int32_t node(int32_t element, int32_t parent);
  // Pushes the stacks `node_id` stands for once its top is a byte set (expanding rule references) onto scratch_.
  void expand(int32_t node_id);
  StateId intern(std::vector<int32_t>& heads);
  StateId compute_transition(StateId state, uint8_t byte);

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> node_ids_;  // (element, parent) -> node
  std::vector<int32_t> heads_;                      // every state's heads, sorted, back to back
  std::vector<State> states_;
  std::unordered_map<std::string, StateId> state_ids_;  // heads as bytes -> state
  std::vector<int32_t> transitions_;                    // state * 256 + byte
  std::vector<int32_t> scratch_;
  StateId start_ = kDead;
};

// Whether `text` is a complete match of `grammar` / a prefix of one (for tests and checks).
bool grammar_matches(std::shared_ptr<const Grammar> grammar, std::string_view text);
bool grammar_accepts_prefix(std::shared_ptr<const Grammar> grammar, std::string_view text);

}  // namespace nvfp4lm::constrain
