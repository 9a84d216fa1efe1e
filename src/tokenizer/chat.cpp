// See chat.h.
#include "tokenizer/chat.h"

#include <algorithm>

#include "core/error.h"

namespace nvfp4lm {
namespace {

struct Piece {
  std::string text;
  std::vector<std::pair<size_t, size_t>> trained;  // byte ranges
};

size_t common_prefix(std::string_view a, std::string_view b) {
  return static_cast<size_t>(
      std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(std::min(a.size(), b.size())), b.begin()).first -
      a.begin());
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// The byte range of assistant turn `i` that is trained, in render(messages[:i+1]) (returned in `turn_text`).
std::pair<size_t, size_t> trained_range(const ChatTemplate& chat_template, std::span<const ChatMessage> messages,
                                        size_t i, const ChatTrainOptions& options, std::string& turn_text) {
  ChatRenderOptions render;
  render.tools = options.tools;
  const std::string before = chat_template.render(messages.first(i), render);
  render.add_generation_prompt = true;
  const std::string prompt = chat_template.render(messages.first(i), render);
  render.add_generation_prompt = false;
  turn_text = chat_template.render(messages.first(i + 1), render);
  NVFP4LM_CHECK(prompt.starts_with(before) && turn_text.starts_with(before),
                "messages[{}]: the chat template ({}) renders the conversation before this assistant turn differently "
                "depending on what follows, so the turn's text cannot be located; train with another --chat-template",
                i, chat_template.origin());
  const std::string_view turn = std::string_view(turn_text).substr(before.size());
  const std::string_view generation = std::string_view(prompt).substr(before.size());
  size_t begin = before.size() + common_prefix(turn, generation);
  size_t end = turn_text.size();
  while (end > begin && is_space(turn_text[end - 1])) --end;
  NVFP4LM_CHECK(end > begin,
                "messages[{}]: the assistant turn renders as nothing after its generation prompt (empty content and no "
                "tool calls?): nothing to train on",
                i);
  if (!options.train_reasoning && messages[i].has_reasoning()) {
    const size_t think_end = std::string_view(turn_text).substr(0, end).rfind("</think>");
    if (think_end != std::string_view::npos && think_end >= begin) {
      begin = think_end + std::string_view("</think>").size();
      while (begin < end && is_space(turn_text[begin])) ++begin;
      NVFP4LM_CHECK(end > begin,
                    "messages[{}]: with --no-train-reasoning the turn has nothing left to train on after its "
                    "reasoning (no answer and no tool calls)",
                    i);
    }
  }
  return {begin, end};
}

EncodedChat encode_piece(const Tokenizer& tokenizer, Piece&& piece) {
  std::sort(piece.trained.begin(), piece.trained.end());
  EncodedText encoded = tokenizer.encode_with_offsets(piece.text, /*allow_special=*/true);
  EncodedChat result;
  result.ids = std::move(encoded.ids);
  result.train_mask.assign(result.ids.size(), 0);
  size_t range = 0;
  for (size_t t = 0; t < result.ids.size(); ++t) {
    const auto [begin, end] = encoded.offsets[t];
    while (range < piece.trained.size() && piece.trained[range].second <= begin) ++range;
    if (range < piece.trained.size() && piece.trained[range].first < end) result.train_mask[t] = 1;
  }
  result.text = std::move(piece.text);
  return result;
}

}  // namespace

std::vector<EncodedChat> encode_chat(const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                                     std::span<const ChatMessage> messages, const ChatTrainOptions& options) {
  std::vector<size_t> turns;  // assistant messages to train, last first
  for (size_t i = messages.size(); i-- > 0;) {
    if (messages[i].role != "assistant") continue;
    turns.push_back(i);
    if (!options.train_all_assistant_turns) break;
  }
  ChatRenderOptions render;
  render.tools = options.tools;
  std::vector<Piece> pieces(1);
  pieces[0].text = chat_template.render(messages, render);
  for (const size_t i : turns) {
    std::string turn_text;
    const auto range = trained_range(chat_template, messages, i, options, turn_text);
    // The newest sample holds this turn when it contains the turn's own rendering; otherwise the turn ends a new one.
    if (!pieces.back().text.starts_with(turn_text)) pieces.push_back(Piece{std::move(turn_text), {}});
    pieces.back().trained.push_back(range);
  }
  std::vector<EncodedChat> samples;
  if (!turns.empty() && pieces.front().trained.empty()) pieces.erase(pieces.begin());  // its last turn renders apart
  for (auto piece = pieces.rbegin(); piece != pieces.rend(); ++piece)
    samples.push_back(encode_piece(tokenizer, std::move(*piece)));
  return samples;
}

std::vector<int32_t> encode_generation_prompt(const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                                              std::span<const ChatMessage> messages,
                                              std::optional<bool> enable_thinking) {
  ChatRenderOptions render;
  render.add_generation_prompt = true;
  render.enable_thinking = enable_thinking;
  return tokenizer.encode(chat_template.render(messages, render));
}

}  // namespace nvfp4lm
