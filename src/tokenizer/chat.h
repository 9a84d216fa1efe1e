// A conversation as training data: the token ids the chat template renders and which of them the loss is on.
//
// Rendering is the template's (tokenizer/chat_template.h), so training sees exactly the text `generate` and `serve`
// render for the same messages. The loss covers what the model itself generates in each assistant turn — found
// without knowing the template's markup, from three renderings per trained turn i:
//   R = render(messages[:i]),  P = render(messages[:i], add_generation_prompt),  T = render(messages[:i+1]).
// The turn's text is T after R; what the model generates is that text after the part it shares with the
// generation prompt (P after R: "<|im_start|>assistant\n", or "...\n<think>\n" for Thinking-2507), up to its last
// non-whitespace character (the "\n" after <|im_end|> is never generated). So the reasoning block, tool calls and the
// end-of-turn token are trained; the header is not. With train_reasoning = false the loss skips the turn's text up to
// the end of its "</think>" (and the whitespace after it) when the message has reasoning.
//
// Some templates render a turn differently once later turns follow (Qwen3 drops the reasoning of turns before the
// last user query). A turn is only trained on text identical to its rendering as the last turn — the text the model
// will produce — so the conversation becomes several samples when needed: the whole rendering holds every turn whose
// rendering is a prefix of it, and each other turn gets a sample ending with it. Templates that render every turn
// the same way (Instruct-2507, any conversation without reasoning) give one sample.
//
// Token masks: the whole sample text is tokenized once (ids exactly tokenizer.encode(text)); a token is trained when
// its source bytes overlap a trained range (a token straddling the header and the answer, "\n\n", is trained).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/chat_message.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm {

struct ChatTrainOptions {
  bool train_all_assistant_turns = true;  // false: only the last assistant message is trained
  bool train_reasoning = true;            // false: --no-train-reasoning, see above
  nlohmann::ordered_json tools;           // the record's tools (null: none), rendered by the template
};

struct EncodedChat {
  std::string text;  // the rendered sample
  std::vector<int32_t> ids;
  std::vector<uint8_t> train_mask;  // same length as ids; 1 = compute the loss on predicting this token
};

// One sample, or several (see above), in conversation order. Error (from the template, or a turn that renders as
// nothing to train on) with the message index.
std::vector<EncodedChat> encode_chat(const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                                     std::span<const ChatMessage> messages, const ChatTrainOptions& options = {});

// The token ids of a generation prompt: render(messages, add_generation_prompt) encoded. `enable_thinking` is
// passed when set (the hybrid Qwen3 template then closes an empty think block, so answers come without reasoning).
std::vector<int32_t> encode_generation_prompt(const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                                              std::span<const ChatMessage> messages,
                                              std::optional<bool> enable_thinking = std::nullopt);

}  // namespace nvfp4lm
