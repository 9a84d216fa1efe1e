// See grammar_matcher.h.
#include "infer/constrain/grammar_matcher.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.h"

namespace nvfp4lm::constrain {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  NVFP4LM_ASSERT(grammar_ != nullptr, "GrammarMatcher without a grammar");
  nodes_.push_back({-1, kDone, 0});  // kDone: the empty stack
  // The start: the root rule as if referred to from a one-element alternative (a frame whose continuation is done).
  scratch_.clear();
  for (int32_t start : grammar_->alternatives(grammar_->root()))
    expand(grammar_->elements()[static_cast<size_t>(start)].kind == Grammar::Element::Kind::End ? kDone
                                                                                                : node(start, kDone));
  std::vector<int32_t> heads = scratch_;
  start_ = intern(heads);
}

int32_t GrammarMatcher::node(int32_t element, int32_t parent) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(element)) << 32) | static_cast<uint32_t>(parent);
  const auto [it, inserted] = node_ids_.try_emplace(key, static_cast<int32_t>(nodes_.size()));
  if (inserted)
    nodes_.push_back({element, parent,
                      add_saturating(grammar_->rest_bytes(element), nodes_[static_cast<size_t>(parent)].bytes_to_end)});
  return it->second;
}

void GrammarMatcher::expand(int32_t node_id) {
  if (node_id == kDone) {
    scratch_.push_back(kDone);
    return;
  }
  const Node frame = nodes_[static_cast<size_t>(node_id)];
  const auto& elements = grammar_->elements();
  const Grammar::Element& element = elements[static_cast<size_t>(frame.element)];
  if (element.kind == Grammar::Element::Kind::Bytes) {
    scratch_.push_back(node_id);
    return;
  }
  // A rule reference: the frame continues after it (or, when it was the last element, is gone: a tail call), and
  // each alternative of the rule goes on top.
  const bool last = elements[static_cast<size_t>(frame.element) + 1].kind == Grammar::Element::Kind::End;
  const int32_t continuation = last ? frame.parent : node(frame.element + 1, frame.parent);
  for (int32_t start : grammar_->alternatives(element.index)) {
    if (elements[static_cast<size_t>(start)].kind == Grammar::Element::Kind::End)
      expand(continuation);
    else
      expand(node(start, continuation));
  }
}

GrammarMatcher::StateId GrammarMatcher::intern(std::vector<int32_t>& heads) {
  std::sort(heads.begin(), heads.end());
  heads.erase(std::unique(heads.begin(), heads.end()), heads.end());
  if (heads.empty()) return kDead;
  std::string key(heads.size() * sizeof(int32_t), '\0');
  std::memcpy(key.data(), heads.data(), key.size());
  const auto [it, inserted] = state_ids_.try_emplace(std::move(key), static_cast<StateId>(states_.size()));
  if (!inserted) return it->second;
  State state;
  state.heads_begin = heads_.size();
  heads_.insert(heads_.end(), heads.begin(), heads.end());
  state.heads_end = heads_.size();
  state.complete = heads.front() == kDone;  // sorted: kDone (0) comes first
  state.closed = state.complete && heads.size() == 1;
  int32_t bytes = kUnboundedBytes;
  for (int32_t head : heads)
    if (head != kDone) bytes = std::min(bytes, nodes_[static_cast<size_t>(head)].bytes_to_end);
  state.min_tokens = state.closed ? 0 : state.complete ? 1 : add_saturating(bytes, grammar_->needs_end_token() ? 1 : 0);
  states_.push_back(state);
  transitions_.resize(states_.size() * 256, kUnknown);
  return it->second;
}

GrammarMatcher::StateId GrammarMatcher::compute_transition(StateId state, uint8_t byte) {
  const auto& elements = grammar_->elements();
  scratch_.clear();
  const State& from = states_[static_cast<size_t>(state)];
  for (size_t i = from.heads_begin; i < from.heads_end; ++i) {
    const int32_t head = heads_[i];
    if (head == kDone) continue;
    const Node frame = nodes_[static_cast<size_t>(head)];
    if (!grammar_->byte_set(elements[static_cast<size_t>(frame.element)].index).contains(byte)) continue;
    const bool last = elements[static_cast<size_t>(frame.element) + 1].kind == Grammar::Element::Kind::End;
    expand(last ? frame.parent : node(frame.element + 1, frame.parent));
  }
  std::vector<int32_t> heads = scratch_;
  const StateId next = intern(heads);
  transitions_[static_cast<size_t>(state) * 256 + byte] = next;
  return next;
}

GrammarMatcher::StateId GrammarMatcher::advance(StateId state, std::string_view bytes) {
  for (char c : bytes) {
    if (state == kDead) return kDead;
    state = advance(state, static_cast<uint8_t>(c));
  }
  return state;
}

GrammarMatcher::StateId GrammarMatcher::compact(StateId keep, size_t max_states) {
  if (states_.size() <= max_states) return keep;
  auto heads_of = [&](StateId id) {
    const State& state = states_[static_cast<size_t>(id)];
    return std::vector<int32_t>(heads_.begin() + static_cast<std::ptrdiff_t>(state.heads_begin),
                                heads_.begin() + static_cast<std::ptrdiff_t>(state.heads_end));
  };
  std::vector<int32_t> start_heads = heads_of(start_);
  std::vector<int32_t> keep_heads = heads_of(keep);
  heads_.clear();
  states_.clear();
  state_ids_.clear();
  transitions_.clear();
  start_ = intern(start_heads);
  return intern(keep_heads);
}

bool grammar_matches(std::shared_ptr<const Grammar> grammar, std::string_view text) {
  GrammarMatcher matcher(std::move(grammar));
  const auto state = matcher.advance(matcher.start(), text);
  return state != GrammarMatcher::kDead && matcher.complete(state);
}

bool grammar_accepts_prefix(std::shared_ptr<const Grammar> grammar, std::string_view text) {
  GrammarMatcher matcher(std::move(grammar));
  return matcher.advance(matcher.start(), text) != GrammarMatcher::kDead;
}

}  // namespace nvfp4lm::constrain
