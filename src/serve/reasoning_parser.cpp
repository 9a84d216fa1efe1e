// See reasoning_parser.h.
#include "serve/reasoning_parser.h"

#include <algorithm>

#include "serve/partial_tag.h"

namespace nvfp4lm::serve {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

size_t trailing_newlines(std::string_view text, size_t end) {
  size_t start = end;
  while (start > 0 && text[start - 1] == '\n') --start;
  return end - start;
}

}  // namespace

ReasoningParser::ReasoningParser(bool starts_inside) : state_(starts_inside ? State::Reasoning : State::Start) {}

ReasoningOutput ReasoningParser::feed(std::string_view text) {
  ReasoningOutput out;
  pending_ += text;
  while (!pending_.empty()) {
    if (state_ == State::Start) {
      if (pending_.starts_with(kThinkOpen)) {
        pending_.erase(0, kThinkOpen.size());
        state_ = State::Reasoning;
        continue;
      }
      if (kThinkOpen.starts_with(pending_)) break;  // may still become "<think>"
      state_ = State::Content;
      continue;
    }
    if (state_ == State::Reasoning) {
      if (!reasoning_started_) {
        pending_.erase(0, std::min(pending_.find_first_not_of('\n'), pending_.size()));
        if (pending_.empty()) break;
        reasoning_started_ = true;
      }
      const size_t close = pending_.find(kThinkClose);
      if (close != std::string::npos) {
        out.reasoning += pending_.substr(0, close - trailing_newlines(pending_, close));
        pending_.erase(0, close + kThinkClose.size());
        state_ = State::AfterReasoning;
        continue;
      }
      const size_t partial = partial_tag(pending_, kThinkClose);
      const size_t keep_from = pending_.size() - partial - trailing_newlines(pending_, pending_.size() - partial);
      out.reasoning += pending_.substr(0, keep_from);
      pending_.erase(0, keep_from);
      break;
    }
    if (state_ == State::AfterReasoning) {
      pending_.erase(0, std::min(pending_.find_first_not_of('\n'), pending_.size()));
      if (pending_.empty()) break;
      state_ = State::Content;
      continue;
    }
    out.content += pending_;
    pending_.clear();
  }
  return out;
}

ReasoningOutput ReasoningParser::finish() {
  ReasoningOutput out;
  if (state_ == State::Reasoning) {
    out.reasoning = pending_.substr(0, pending_.size() - trailing_newlines(pending_, pending_.size()));
  } else if (state_ == State::Start || state_ == State::Content) {
    out.content = pending_;
  }
  pending_.clear();
  return out;
}

}  // namespace nvfp4lm::serve
