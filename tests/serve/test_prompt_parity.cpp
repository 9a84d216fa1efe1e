// Issue 29's rule, checked where serve and training meet: for the same messages and tools, the prompt serve renders
// for a chat request (render_prompt) is exactly the text a training sample holds before the turn it trains, for each
// bundled Qwen3 template, with tools, tool calls, tool results and reasoning in the conversation.
#include <gtest/gtest.h>

#include "serve/sequence_request.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer_test_util.h"

namespace nvfp4lm::test_prompt_parity {
namespace {

using ordered_json = nlohmann::ordered_json;

TEST(PromptParity, ServeRendersWhatTrainingTrainsEachTurnAfter) {
  const Tokenizer& tokenizer = test::qwen3_tokenizer();
  const ordered_json tools = ordered_json::parse(
      R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                          "required": ["city"]}}}])");
  const std::vector<ChatMessage> conversation = read_chat_messages(ordered_json::parse(R"([
      {"role": "system", "content": "You check the weather."},
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": "", "reasoning_content": "Paris: call the tool.",
       "tool_calls": [{"id": "call_1", "type": "function",
                       "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 1}"}}]},
      {"role": "tool", "content": "18C, sunny", "tool_call_id": "call_1"},
      {"role": "assistant", "content": "It is 18C and sunny.", "reasoning_content": "The tool said 18C."}])"));
  for (const char* name : {"qwen3-instruct-2507", "qwen3-thinking-2507", "qwen3-hybrid"}) {
    serve::PromptRules rules;
    rules.chat_template = std::make_shared<const ChatTemplate>(ChatTemplate::resolve(tokenizer, name));
    ChatTrainOptions train;
    train.tools = tools;
    const std::vector<EncodedChat> samples = encode_chat(tokenizer, *rules.chat_template, conversation, train);
    for (const size_t turn : {size_t{2}, size_t{4}}) {
      serve::CompletionRequest request;
      request.messages.assign(conversation.begin(), conversation.begin() + static_cast<std::ptrdiff_t>(turn));
      request.tools = tools;
      const std::string prompt = serve::render_prompt(request, rules);
      // The sample that trains this turn starts with the prompt, and its first trained token follows it.
      const std::vector<int32_t> prompt_ids = tokenizer.encode(prompt);
      bool found = false;
      for (const EncodedChat& sample : samples) {
        if (!sample.text.starts_with(prompt) || sample.ids.size() <= prompt_ids.size()) continue;
        if (!std::equal(prompt_ids.begin(), prompt_ids.end(), sample.ids.begin())) continue;
        if (sample.train_mask[prompt_ids.size()] != 1) continue;
        found = true;
      }
      EXPECT_TRUE(found) << name << ": no training sample continues serve's prompt for turn " << turn << ":\n"
                         << prompt;
    }
  }
}

}  // namespace
}  // namespace nvfp4lm::test_prompt_parity
