// See reasoning_parser.h.
#include "serve/reasoning_parser.h"

#include <algorithm>

namespace nvfp4lm::serve {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

size_t partial_tag(std::string_view text, std::string_view tag) {
  for (size_t length = std::min(text.size(), tag.size() - 1); length > 0; --length)
    if (text.substr(text.size() - length) == tag.substr(0, length)) return length;
  return 0;
}

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
      if (pending_.starts_with(kOpen)) {
        pending_.erase(0, kOpen.size());
        state_ = State::Reasoning;
        continue;
      }
      if (kOpen.starts_with(pending_)) break;  // may still become "<think>"
      state_ = State::Content;
      continue;
    }
    if (state_ == State::Reasoning) {
      if (!reasoning_started_) {
        pending_.erase(0, std::min(pending_.find_first_not_of('\n'), pending_.size()));
        if (pending_.empty()) break;
        reasoning_started_ = true;
      }
      const size_t close = pending_.find(kClose);
      if (close != std::string::npos) {
        out.reasoning += pending_.substr(0, close - trailing_newlines(pending_, close));
        pending_.erase(0, close + kClose.size());
        state_ = State::AfterReasoning;
        continue;
      }
      const size_t partial = partial_tag(pending_, kClose);
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
