// Chat rendering and training masks against transformers' apply_chat_template (chat_template.jsonl, written
// by tests/reference/make_tokenizer_fixtures.py): "file" cases use the bundled tokenizer_config.json
// template (hybrid thinking), "instruct2507" cases the Qwen3-Instruct-2507 template.
#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer/chat.h"
#include "tokenizer_test_util.h"

namespace nvfp4lm {
namespace {

using test::qwen3_tokenizer;

struct ChatCase {
  std::string name;
  std::string template_name;
  std::vector<ChatMessage> messages;
  ChatOptions options;
  std::string text;
  std::vector<int32_t> ids;
  std::vector<uint8_t> mask;
};

std::vector<ChatCase> chat_cases() {
  std::vector<ChatCase> cases;
  for (const auto& row : test::read_jsonl(test::fixture_path("tokenizer/chat_template.jsonl"))) {
    if (row.contains("meta")) continue;
    ChatCase c;
    c.name = row["name"];
    c.template_name = row["template"];
    for (const auto& m : row["messages"]) c.messages.push_back({m["role"], m["content"]});
    c.options.add_generation_prompt = row["add_generation_prompt"];
    c.options.style = c.template_name == "file" ? ChatTemplate::HybridThinking : ChatTemplate::Instruct2507;
    if (!row["enable_thinking"].is_null()) c.options.enable_thinking = row["enable_thinking"];
    c.text = row["text"];
    c.ids = test::ids_of(row["ids"]);
    c.mask = row["train_mask"].get<std::vector<uint8_t>>();
    cases.push_back(std::move(c));
  }
  return cases;
}

TEST(Chat, FileTemplateIsDetectedAsHybrid) {
  EXPECT_EQ(detect_chat_template(qwen3_tokenizer().chat_template_source()), ChatTemplate::HybridThinking);
  EXPECT_EQ(detect_chat_template(""), ChatTemplate::Instruct2507);
  EXPECT_EQ(detect_chat_template("{{- '<|im_start|>' + message.role + '\\n' + content }}"), ChatTemplate::Instruct2507);
}

TEST(Chat, RenderMatchesApplyChatTemplate) {
  auto cases = chat_cases();
  ASSERT_GE(cases.size(), 30u);
  for (const ChatCase& c : cases) {
    EXPECT_EQ(render_chat(c.messages, c.options), c.text) << c.name << " / " << c.template_name;
  }
}

TEST(Chat, EncodeChatIdsAndMaskMatchReference) {
  const Tokenizer& tok = qwen3_tokenizer();
  for (const ChatCase& c : chat_cases()) {
    EncodedChat enc = encode_chat(tok, c.messages, c.options);
    EXPECT_EQ(enc.ids, c.ids) << c.name << " / " << c.template_name;
    EXPECT_EQ(enc.train_mask, c.mask) << c.name << " / " << c.template_name;
    EXPECT_EQ(enc.ids, tok.encode(render_chat(c.messages, c.options))) << c.name;
  }
}

TEST(Chat, MaskCoversAssistantContentAndClosingImEndOnly) {
  const Tokenizer& tok = qwen3_tokenizer();
  std::vector<ChatMessage> messages = {{"system", "S"}, {"user", "Q"}, {"assistant", "Answer here."}};
  EncodedChat enc = encode_chat(tok, messages);
  ASSERT_EQ(enc.ids.size(), enc.train_mask.size());
  std::vector<int32_t> trained_ids;
  for (size_t i = 0; i < enc.ids.size(); ++i) {
    if (enc.train_mask[i]) trained_ids.push_back(enc.ids[i]);
  }
  EXPECT_EQ(tok.decode(trained_ids), "Answer here.<|im_end|>");
  EXPECT_EQ(enc.ids.back(), tok.encode("\n").at(0));  // the newline after <|im_end|> is not trained
  EXPECT_EQ(enc.train_mask.back(), 0);

  ChatOptions last_only;
  last_only.train_all_assistant_turns = false;
  std::vector<ChatMessage> two = {{"user", "a"}, {"assistant", "b"}, {"user", "c"}, {"assistant", "d"}};
  EncodedChat all = encode_chat(tok, two), last = encode_chat(tok, two, last_only);
  EXPECT_EQ(all.ids, last.ids);
  EXPECT_EQ(std::count(all.train_mask.begin(), all.train_mask.end(), 1), 4);    // b <|im_end|> d <|im_end|>
  EXPECT_EQ(std::count(last.train_mask.begin(), last.train_mask.end(), 1), 2);  // d <|im_end|>
}

TEST(Chat, MaskFollowsTokensThroughNfc) {
  // Non-NFC content changes length when normalised; the mask must still mark exactly the assistant part.
  const Tokenizer& tok = qwen3_tokenizer();
  std::vector<ChatMessage> messages = {{"user", "cafe\xCC\x81?"}, {"assistant", "Cafe\xCC\x81 \xE2\x84\xAB ok"}};
  EncodedChat enc = encode_chat(tok, messages);
  std::vector<int32_t> trained;
  for (size_t i = 0; i < enc.ids.size(); ++i) {
    if (enc.train_mask[i]) trained.push_back(enc.ids[i]);
  }
  EXPECT_EQ(tok.decode(trained), "Caf\xC3\xA9 \xC3\x85 ok<|im_end|>");
}

TEST(Chat, SimpleRenderingAndErrors) {
  std::vector<ChatMessage> messages = {{"user", "Hi"}};
  EXPECT_EQ(render_chat(messages, true), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render_chat(messages, false), "<|im_start|>user\nHi<|im_end|>\n");
  std::vector<ChatMessage> bad = {{"narrator", "x"}};
  try {
    render_chat(bad, false);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("narrator"), std::string::npos);
  }
}

}  // namespace
}  // namespace nvfp4lm
