// What running the chat template costs training data and prompts (tokenizer/chat_template.h, chat.h), against
// tokenizing the same text: one render of a conversation; encode_chat of it (one render, plus three per trained
// turn: before the turn, with the generation prompt, and with the turn); and the tokenizer's encode_with_offsets of the
// rendered text, the work a hard-coded rendering would still have done. Bundled Qwen3 tokenizer (hybrid template, the
// one `auto` uses with it) and the Instruct-2507 template; a whoami-sized 2-turn chat and a 6-turn tool-using one.
#include <benchmark/benchmark.h>

#include "tokenizer/chat.h"

namespace {

using namespace nvfp4lm;
using ordered_json = nlohmann::ordered_json;

const Tokenizer& tokenizer() {
  static const Tokenizer loaded = Tokenizer::load(NVFP4LM_SOURCE_DIR "/models/qwen3-tokenizer");
  return loaded;
}

const ChatTemplate& chat_template(int which) {
  static const ChatTemplate hybrid = ChatTemplate::resolve(tokenizer());
  static const ChatTemplate instruct = ChatTemplate::resolve(tokenizer(), "qwen3-instruct-2507");
  return which == 0 ? hybrid : instruct;
}

const std::vector<ChatMessage>& conversation(int which) {
  static const std::vector<ChatMessage> whoami = {{"system", "You are a helpful assistant."},
                                                  {"user", "Who are you?"},
                                                  {"assistant", "I am Qwen, a large language model."},
                                                  {"user", "What is 2 + 2?"},
                                                  {"assistant", "2 + 2 = 4."}};
  static const std::vector<ChatMessage> tools = read_chat_messages(ordered_json::parse(R"([
      {"role": "user", "content": "Weather in Paris and Rome tomorrow?"},
      {"role": "assistant", "content": "", "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
        {"id": "b", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
      {"role": "tool", "content": "18C, sunny", "tool_call_id": "a"},
      {"role": "tool", "content": "24C, cloudy", "tool_call_id": "b"},
      {"role": "assistant", "content": "Paris: 18C and sunny. Rome: 24C and cloudy."},
      {"role": "user", "content": "Thanks! And in Oslo?"}])"));
  return which == 0 ? whoami : tools;
}

const ordered_json& tools_of(int which) {
  static const ordered_json none;
  static const ordered_json tools = ordered_json::parse(
      R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
  return which == 0 ? none : tools;
}

void BM_Render(benchmark::State& state) {
  const ChatTemplate& t = chat_template(static_cast<int>(state.range(0)));
  ChatRenderOptions options;
  options.tools = tools_of(static_cast<int>(state.range(1)));
  for (auto _ : state) benchmark::DoNotOptimize(t.render(conversation(static_cast<int>(state.range(1))), options));
}

void BM_EncodeChat(benchmark::State& state) {
  const ChatTemplate& t = chat_template(static_cast<int>(state.range(0)));
  ChatTrainOptions options;
  options.tools = tools_of(static_cast<int>(state.range(1)));
  for (auto _ : state)
    benchmark::DoNotOptimize(encode_chat(tokenizer(), t, conversation(static_cast<int>(state.range(1))), options));
}

void BM_TokenizeRendered(benchmark::State& state) {
  ChatRenderOptions options;
  options.tools = tools_of(static_cast<int>(state.range(1)));
  const std::string text =
      chat_template(static_cast<int>(state.range(0))).render(conversation(static_cast<int>(state.range(1))), options);
  for (auto _ : state) benchmark::DoNotOptimize(tokenizer().encode_with_offsets(text));
}

// Args: {template: 0 hybrid, 1 instruct-2507; conversation: 0 whoami 2 turns, 1 tools 6 messages}.
BENCHMARK(BM_Render)->ArgsProduct({{0, 1}, {0, 1}});
BENCHMARK(BM_EncodeChat)->ArgsProduct({{0, 1}, {0, 1}});
BENCHMARK(BM_TokenizeRendered)->ArgsProduct({{0, 1}, {0, 1}});

}  // namespace

BENCHMARK_MAIN();
