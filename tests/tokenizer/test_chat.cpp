// Chat templates and training samples (tokenizer/chat_template.h, chat.h).
//
// Rendering is checked against transformers' apply_chat_template (chat_template.jsonl, written by
// tests/reference/make_tokenizer_fixtures.py): "file" cases use the bundled tokenizer's own template (hybrid thinking),
// "instruct2507" cases the Instruct-2507 template. The fixture's ids and masks (its rule: from after
// "<|im_start|>assistant\n" to the next "<|im_end|>") are the reference wherever a conversation stays one sample.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "tokenizer/chat.h"
#include "tokenizer_test_util.h"

namespace nvfp4lm::test_chat {
namespace {

using test::qwen3_tokenizer;
using ordered_json = nlohmann::ordered_json;

const ChatTemplate& hybrid() {
  static const ChatTemplate t = ChatTemplate::resolve(qwen3_tokenizer());
  return t;
}
const ChatTemplate& instruct() {
  static const ChatTemplate t = ChatTemplate::resolve(qwen3_tokenizer(), "qwen3-instruct-2507");
  return t;
}
const ChatTemplate& thinking() {
  static const ChatTemplate t = ChatTemplate::resolve(qwen3_tokenizer(), "qwen3-thinking-2507");
  return t;
}

struct ChatCase {
  std::string name;
  const ChatTemplate* chat_template = nullptr;
  std::vector<ChatMessage> messages;
  ChatRenderOptions options;
  std::string text;
  std::vector<int32_t> ids;
  std::vector<uint8_t> mask;
};

std::vector<ChatCase> chat_cases() {
  std::vector<ChatCase> cases;
  for (const auto& row : test::read_jsonl(test::fixture_path("tokenizer/chat_template.jsonl"))) {
    if (row.contains("meta")) continue;
    ChatCase c;
    c.name = row["name"].get<std::string>() + " / " + row["template"].get<std::string>();
    c.chat_template = row["template"] == "file" ? &hybrid() : &instruct();
    // As written: some reference conversations have tool results after an assistant turn without calls.
    c.messages = read_chat_messages(row["messages"], {}, ToolTurns::AsWritten);
    c.options.add_generation_prompt = row["add_generation_prompt"];
    if (!row["enable_thinking"].is_null()) c.options.enable_thinking = row["enable_thinking"].get<bool>();
    c.text = row["text"];
    c.ids = test::ids_of(row["ids"]);
    c.mask = row["train_mask"].get<std::vector<uint8_t>>();
    cases.push_back(std::move(c));
  }
  return cases;
}

std::string trained_text(const Tokenizer& tok, const EncodedChat& sample) {
  std::vector<int32_t> trained;
  for (size_t i = 0; i < sample.ids.size(); ++i) {
    if (sample.train_mask[i]) trained.push_back(sample.ids[i]);
  }
  return tok.decode(trained);
}

TEST(ChatTemplate, BundledHybridIsTheBundledTokenizersOwn) {
  EXPECT_EQ(std::string(*bundled_chat_template("qwen3-hybrid")), qwen3_tokenizer().chat_template_source());
  EXPECT_NE(hybrid().origin().find("the tokenizer's own"), std::string::npos) << hybrid().origin();
  EXPECT_FALSE(hybrid().prompt_opens_think());
  EXPECT_FALSE(instruct().prompt_opens_think());
  EXPECT_TRUE(thinking().prompt_opens_think());
  for (std::string_view name : bundled_chat_template_names()) EXPECT_NO_THROW(check_chat_template_flag(name));
  EXPECT_NO_THROW(check_chat_template_flag("instruct-2507"));  // the names of earlier versions
  EXPECT_NO_THROW(check_chat_template_flag("hybrid-thinking"));
  try {
    check_chat_template_flag("no-such-template");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("qwen3-thinking-2507"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, RenderMatchesApplyChatTemplate) {
  const auto cases = chat_cases();
  ASSERT_GE(cases.size(), 30u);
  for (const ChatCase& c : cases) EXPECT_EQ(c.chat_template->render(c.messages, c.options), c.text) << c.name;
}

TEST(ChatTemplate, UnrunnableTemplateIsAnErrorNamingTheConstruct) {
  try {
    ChatTemplate("{% include 'header.jinja' %}x", "--chat-template t.jinja");
    FAIL();
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("t.jinja"), std::string::npos) << message;
    EXPECT_NE(message.find("include"), std::string::npos) << message;
  }
  const ChatTemplate raising("{{ raise_exception('System role not supported') }}", "a test template");
  const ChatMessage question("user", "?");
  try {
    raising.render({&question, 1});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("System role not supported"), std::string::npos) << e.what();
  }
}

TEST(ChatTraining, IdsAndMasksMatchTheReferenceWhereOneSample) {
  const Tokenizer& tok = qwen3_tokenizer();
  int compared = 0;
  for (const ChatCase& c : chat_cases()) {
    if (c.options.add_generation_prompt || c.options.enable_thinking) continue;
    const std::vector<EncodedChat> samples = encode_chat(tok, *c.chat_template, c.messages);
    ASSERT_FALSE(samples.empty()) << c.name;
    for (const EncodedChat& sample : samples) EXPECT_EQ(sample.ids, tok.encode(sample.text)) << c.name;
    EXPECT_EQ(samples.back().text, c.text) << c.name;  // the whole conversation ends the last sample
    if (samples.size() != 1) continue;
    EXPECT_EQ(samples[0].ids, c.ids) << c.name;
    EXPECT_EQ(samples[0].train_mask, c.mask) << c.name;
    ++compared;
  }
  EXPECT_GE(compared, 25);
}

TEST(ChatTraining, MaskCoversTheAnswerAndItsEndOfTurnOnly) {
  const Tokenizer& tok = qwen3_tokenizer();
  const std::vector<ChatMessage> messages = {{"system", "S"}, {"user", "Q"}, {"assistant", "Answer here."}};
  const std::vector<EncodedChat> samples = encode_chat(tok, instruct(), messages);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(trained_text(tok, samples[0]), "Answer here.<|im_end|>");
  EXPECT_EQ(samples[0].ids.back(), tok.encode("\n").at(0));  // the newline after <|im_end|> is not trained
  EXPECT_EQ(samples[0].train_mask.back(), 0);

  ChatTrainOptions last_only;
  last_only.train_all_assistant_turns = false;
  const std::vector<ChatMessage> two = {{"user", "a"}, {"assistant", "b"}, {"user", "c"}, {"assistant", "d"}};
  const auto all = encode_chat(tok, instruct(), two), last = encode_chat(tok, instruct(), two, last_only);
  ASSERT_EQ(all.size(), 1u);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(all[0].ids, last[0].ids);
  EXPECT_EQ(trained_text(tok, all[0]), "b<|im_end|>d<|im_end|>");
  EXPECT_EQ(trained_text(tok, last[0]), "d<|im_end|>");
}

TEST(ChatTraining, MaskFollowsTokensThroughNfc) {
  // Non-NFC content changes length when normalised; the mask must still mark exactly the assistant part.
  const Tokenizer& tok = qwen3_tokenizer();
  const std::vector<ChatMessage> messages = {{"user", "cafe\xCC\x81?"}, {"assistant", "Cafe\xCC\x81 \xE2\x84\xAB ok"}};
  const auto samples = encode_chat(tok, instruct(), messages);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(trained_text(tok, samples[0]), "Caf\xC3\xA9 \xC3\x85 ok<|im_end|>");
}

// The hybrid template drops the reasoning of turns before the last user query: such a turn is trained in a sample of
// its own, ending with it, rendered as when it was generated (with its think block).
TEST(ChatTraining, TurnsRenderedApartBecomeTheirOwnSamples) {
  const Tokenizer& tok = qwen3_tokenizer();
  const std::vector<ChatMessage> messages = {
      {"user", "q1"}, {"assistant", "a1", {{"reasoning_content", "r1"}}}, {"user", "q2"}, {"assistant", "a2"}};
  const auto samples = encode_chat(tok, hybrid(), messages);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].text, hybrid().render(std::span(messages).first(2)));
  EXPECT_EQ(trained_text(tok, samples[0]), "<think>\nr1\n</think>\n\na1<|im_end|>");
  EXPECT_EQ(samples[1].text, hybrid().render(messages));
  EXPECT_EQ(trained_text(tok, samples[1]), "<think>\n\n</think>\n\na2<|im_end|>");
  // Instruct-2507 as published (issue 48; the first bundled copy was a reconstruction without reasoning) drops earlier
  // turns' reasoning too: the same split.
  const auto instruct_samples = encode_chat(tok, instruct(), messages);
  ASSERT_EQ(instruct_samples.size(), 2u);
  EXPECT_EQ(trained_text(tok, instruct_samples[0]), "<think>\nr1\n</think>\n\na1<|im_end|>");
  EXPECT_EQ(trained_text(tok, instruct_samples[1]), "a2<|im_end|>");
}

TEST(ChatTraining, ReasoningIsTrainedUnlessAskedNot) {
  const Tokenizer& tok = qwen3_tokenizer();
  const std::vector<ChatMessage> messages = {{"user", "2+2?"},
                                             {"assistant", "4", {{"reasoning_content", "two and two"}}}};
  // Thinking-2507's generation prompt opens the think block: the reasoning is the first thing the model writes.
  auto samples = encode_chat(tok, thinking(), messages);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(trained_text(tok, samples[0]), "two and two\n</think>\n\n4<|im_end|>");
  ChatTrainOptions no_reasoning;
  no_reasoning.train_reasoning = false;
  samples = encode_chat(tok, thinking(), messages, no_reasoning);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(trained_text(tok, samples[0]), "4<|im_end|>");
  samples = encode_chat(tok, hybrid(), messages, no_reasoning);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(trained_text(tok, samples[0]), "4<|im_end|>");
  // Reasoning in the content (<think>...</think>) counts as reasoning too.
  const std::vector<ChatMessage> inline_think = {{"user", "q"}, {"assistant", "<think>\nhm\n</think>\n\nA"}};
  samples = encode_chat(tok, hybrid(), inline_think, no_reasoning);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(trained_text(tok, samples[0]), "A<|im_end|>");
}

TEST(ChatTraining, ToolsAndToolCallsAreRenderedAndCallsTrained) {
  const Tokenizer& tok = qwen3_tokenizer();
  const ordered_json tools = ordered_json::parse(
      R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
  const ordered_json call = ordered_json::parse(
      R"([{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}])");
  const std::vector<ChatMessage> messages = {{"user", "Weather in Paris?"},
                                             {"assistant", "", {{"tool_calls", call}}},
                                             {"tool", "18C, sunny", {{"tool_call_id", "call_1"}}},
                                             {"assistant", "It is 18C and sunny."}};
  ChatTrainOptions options;
  options.tools = tools;
  for (const ChatTemplate* t : {&instruct(), &hybrid(), &thinking()}) {
    const auto samples = encode_chat(tok, *t, messages, options);
    ASSERT_FALSE(samples.empty()) << t->origin();
    const EncodedChat& whole = samples.back();
    EXPECT_NE(whole.text.find("# Tools"), std::string::npos) << t->origin();
    EXPECT_NE(whole.text.find("\"name\": \"get_weather\""), std::string::npos) << t->origin();
    std::string trained;
    for (const EncodedChat& sample : samples) trained += trained_text(tok, sample);
    EXPECT_NE(
        trained.find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
                     "<|im_end|>"),
        std::string::npos)
        << t->origin() << ": " << trained;
    EXPECT_NE(trained.find("It is 18C and sunny.<|im_end|>"), std::string::npos) << t->origin() << ": " << trained;
    EXPECT_EQ(trained.find("18C, sunny"), std::string::npos) << t->origin() << ": the tool result is not trained";
    EXPECT_EQ(trained.find("# Tools"), std::string::npos) << t->origin();
  }
}

// What a sample trains each turn on follows exactly the prompt generate and serve render for the conversation before
// that turn (encode_generation_prompt / render with add_generation_prompt).
TEST(ChatTraining, EachTrainedTurnFollowsTheGenerationPromptOfItsConversation) {
  const Tokenizer& tok = qwen3_tokenizer();
  const std::vector<ChatMessage> messages = {{"system", "Be brief."},
                                             {"user", "q1"},
                                             {"assistant", "a1", {{"reasoning_content", "r1"}}},
                                             {"user", "q2 ünïcødé"},
                                             {"assistant", "a2", {{"reasoning_content", "r2"}}}};
  for (const ChatTemplate* t : {&instruct(), &thinking()}) {
    const auto samples = encode_chat(tok, *t, messages);
    for (const size_t turn : {size_t{2}, size_t{4}}) {
      ChatRenderOptions prompt;
      prompt.add_generation_prompt = true;
      const std::string generation_prompt = t->render(std::span(messages).first(turn), prompt);
      const auto holder = std::find_if(samples.begin(), samples.end(), [&](const EncodedChat& s) {
        return s.text.starts_with(generation_prompt) &&
               s.text.starts_with(t->render(std::span(messages).first(turn + 1)));
      });
      ASSERT_NE(holder, samples.end()) << t->origin() << " turn " << turn;
      // The tokens the generation prompt adds to the conversation before are not trained; the next token is.
      const std::vector<int32_t> prompt_ids = tok.encode(generation_prompt);
      ASSERT_LT(prompt_ids.size(), holder->ids.size());
      EXPECT_TRUE(std::equal(prompt_ids.begin(), prompt_ids.end(), holder->ids.begin())) << t->origin();
      const size_t before = tok.encode(t->render(std::span(messages).first(turn))).size();
      EXPECT_EQ(std::count(holder->train_mask.begin() + static_cast<std::ptrdiff_t>(before),
                           holder->train_mask.begin() + static_cast<std::ptrdiff_t>(prompt_ids.size()), 1),
                0)
          << t->origin() << " turn " << turn;
      EXPECT_EQ(holder->train_mask[prompt_ids.size()], 1) << t->origin() << " turn " << turn;
    }
  }
}

TEST(ChatMessages, ReadFromJsonWithEveryField) {
  const auto messages = read_chat_messages(ordered_json::parse(R"([
      {"role": "developer", "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}]},
      {"role": "user", "content": "Hi"},
      {"role": "assistant", "content": null, "reasoning_content": "r",
       "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]},
      {"role": "tool", "content": "1", "tool_call_id": "c1", "name": "f"}])"));
  ASSERT_EQ(messages.size(), 4u);
  EXPECT_EQ(messages[0].role, "system");
  EXPECT_EQ(messages[0].content, "Be brief.");
  EXPECT_TRUE(messages[2].has_tool_calls());
  EXPECT_TRUE(messages[2].has_reasoning());
  EXPECT_EQ(messages[2].content, "");
  EXPECT_EQ(messages[3].to_json().dump(), R"({"role":"tool","content":"1","tool_call_id":"c1","name":"f"})");
}

TEST(ChatMessages, MistakesNameTheKey) {
  const std::pair<const char*, const char*> cases[] = {
      {R"([{"role": "narrator", "content": "x"}])", "messages[0].role"},
      {R"([{"role": "user"}])", "messages[0].content"},
      {R"([{"role": "user", "content": 3}])", "messages[0].content"},
      {R"([{"role": "user", "content": [{"type": "image_url"}]}])", "messages[0].content[0]"},
      {R"([{"role": "user", "content": "x", "tool_calls": []}])", "messages[0].tool_calls"},
      {R"([{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}])",
       "messages[0].tool_calls[0].function.name"},
      {R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 3}}]}])",
       "messages[0].tool_calls[0].function.arguments"},
      {R"([{"role": "assistant", "content": "x", "reasoning_content": 1}])", "messages[0].reasoning_content"},
      {R"([])", "messages"},
  };
  for (const auto& [text, path] : cases) {
    try {
      read_chat_messages(ordered_json::parse(text), "data.jsonl line 3");
      ADD_FAILURE() << text;
    } catch (const ChatMessageError& e) {
      EXPECT_EQ(e.path(), path) << text;
      EXPECT_TRUE(std::string(e.what()).starts_with("data.jsonl line 3: " + std::string(path))) << e.what();
    }
  }
  try {
    check_chat_tools(ordered_json::parse(R"([{"type": "function", "function": {"description": "no name"}}])"));
    ADD_FAILURE();
  } catch (const ChatMessageError& e) {
    EXPECT_EQ(e.path(), "tools[0].function.name");
  }
}

// Issue 53 item 4: tool calls broken in the ways OpenAI's API refuses were trained as written (`{"arguments": {not
// json}`); each is now an error naming the line and the key. transformers' documented form (calls without ids,
// answered in order by tool messages without tool_call_id) still reads: the reference conversations are in it.
TEST(ChatMessages, BrokenToolCallsAreRefusedAsOpenAiRefusesThem) {
  const std::string user = R"({"role": "user", "content": "Weather?"})";
  auto call = [](const std::string& id, const std::string& arguments) {
    return R"({"role": "assistant", "content": null, "tool_calls": [{)" + id +
           R"("type": "function", "function": {"name": "get_weather", "arguments": )" + arguments + "}}]}";
  };
  const std::string good = call(R"("id": "c1", )", R"("{\"city\": \"Paris\"}")");
  const std::string answer = R"({"role": "tool", "content": "18C", "tool_call_id": "c1"})";
  const std::pair<std::string, std::string> cases[] = {
      {call(R"("id": "c1", )", R"("{not json")"), "messages[1].tool_calls[0].function.arguments"},
      {call(R"("id": "c1", )", R"("[1, 2]")"), "messages[1].tool_calls[0].function.arguments"},
      {call(R"("id": "c1", )", R"("{\"city\": \"Par")"), "messages[1].tool_calls[0].function.arguments"},
      {call(R"("id": "c1", )", R"([1, 2])"), "messages[1].tool_calls[0].function.arguments"},
      {call(R"("id": "c1", )", "null"), "messages[1].tool_calls[0].function.arguments"},
      {call(R"("id": "", )", R"("{}")"), "messages[1].tool_calls[0].id"},
      {good + "," + R"({"role": "tool", "content": "18C"})", "messages[2].tool_call_id"},
      {good + "," + R"({"role": "tool", "content": "18C", "tool_call_id": "c2"})", "messages[2].tool_call_id"},
      {good + "," + answer + "," + answer, "messages[3].tool_call_id"},                             // answered twice
      {R"({"role": "tool", "content": "18C", "tool_call_id": "c1"})", "messages[1].tool_call_id"},  // no call
      {R"({"role": "tool", "content": "18C"})", "messages[1]"},                                     // no call
      {call("", R"("{}")") + "," + R"({"role": "tool", "name": "get_time", "content": "18C"})", "messages[2].name"},
      {call("", R"("{}")") + "," + R"({"role": "tool", "content": "1"}, {"role": "tool", "content": "2"})",
       "messages[3]"},                                                       // two answers to one call
      {R"({"role": "assistant", "content": null})", "messages[1].content"},  // neither content nor calls
      {R"({"role": "assistant"})", "messages[1].content"},
  };
  for (const auto& [messages, path] : cases) {
    const std::string text = "[" + user + "," + messages + "]";
    try {
      read_chat_messages(ordered_json::parse(text), "data.jsonl line 7");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const ChatMessageError& e) {
      EXPECT_EQ(e.path(), path) << text << "\n" << e.what();
      EXPECT_TRUE(std::string(e.what()).starts_with("data.jsonl line 7: " + path)) << e.what();
    }
  }
  // What OpenAI accepts still reads: arguments as JSON text or an object, a call answered, two calls answered in
  // either order, the same id again once the first call was answered.
  const std::string two = R"({"role": "assistant", "content": "", "tool_calls": [
      {"id": "a", "function": {"name": "f", "arguments": "{}"}},
      {"id": "b", "type": "function", "function": {"name": "g", "arguments": {"x": [1]}}}]})";
  for (const std::string& messages :
       {good + "," + answer, good + "," + answer + "," + R"({"role": "assistant", "content": "18C."})",
        two + "," + R"({"role": "tool", "content": "2", "tool_call_id": "b"})" + "," +
            R"({"role": "tool", "content": "1", "tool_call_id": "a"})",
        good + "," + answer + "," + good + "," + answer, good,
        call("", R"({"city": "Paris"})") + "," + R"({"role": "tool", "name": "get_weather", "content": "18C"})"}) {
    const std::string text = "[" + user + "," + messages + "]";
    EXPECT_NO_THROW(read_chat_messages(ordered_json::parse(text))) << text;
  }
}

}  // namespace
}  // namespace nvfp4lm::test_chat
