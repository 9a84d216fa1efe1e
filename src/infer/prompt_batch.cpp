// See prompt_batch.h.
#include "infer/prompt_batch.h"

#include <fmt/format.h>

#include <map>
#include <sstream>

#include "core/error.h"
#include "core/json_text.h"

namespace nvfp4lm {
namespace {

using nlohmann::json;

const char* finish_reason_name(StopReason reason) {
  return reason == StopReason::EndOfSequence || reason == StopReason::StopString ? "stop" : "length";
}

}  // namespace

std::vector<int32_t> encode_prompt(const Tokenizer& tokenizer, std::string_view text, const PromptFormat& format) {
  if (format.raw) return tokenizer.encode(text);
  std::vector<ChatMessage> messages;
  if (!format.system.empty()) messages.push_back({"system", format.system});
  messages.push_back({"user", std::string(text)});
  NVFP4LM_ASSERT(format.chat_template.has_value(), "a chat prompt needs the chat template");
  return encode_generation_prompt(tokenizer, *format.chat_template, messages, format.enable_thinking);
}

std::vector<PromptLine> read_prompt_lines(const fs::path& path, const Tokenizer& tokenizer,
                                          const PromptFormat& format) {
  std::istringstream text(read_text_file(path));
  std::vector<PromptLine> lines;
  std::string raw_line;
  for (int64_t number = 1; std::getline(text, raw_line); ++number) {
    if (raw_line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{} line {}", path.string(), number);
    const json object = parse_json(raw_line, where);
    NVFP4LM_CHECK(object.is_object(), "{}: expected a JSON object with \"prompt\" or \"messages\", got {}", where,
                  json_excerpt(object));
    PromptLine line;
    line.id = object.contains("id") ? object["id"] : json(nullptr);
    const bool has_prompt = object.contains("prompt"), has_messages = object.contains("messages");
    NVFP4LM_CHECK(has_prompt != has_messages, "{}: give exactly one of \"prompt\" (a string) and \"messages\"", where);
    if (has_prompt) {
      NVFP4LM_CHECK(object["prompt"].is_string(), "{}: \"prompt\" must be a string, got {}", where,
                    json_excerpt(object["prompt"]));
      line.prompt = encode_prompt(tokenizer, object["prompt"].get<std::string>(), format);
    } else {
      NVFP4LM_CHECK(!format.raw, "{}: \"messages\" need the chat template; drop --raw or give \"prompt\"", where);
      NVFP4LM_ASSERT(format.chat_template.has_value(), "a chat prompt needs the chat template");
      line.prompt = encode_generation_prompt(tokenizer, *format.chat_template,
                                             read_chat_messages(object["messages"], where), format.enable_thinking);
    }
    NVFP4LM_CHECK(!line.prompt.empty(), "{}: the prompt is empty: there is nothing to continue from", where);
    if (object.contains("max_tokens")) {
      const json& max_tokens = object["max_tokens"];
      // Compared before converting: a positive literal parses as unsigned, and 2^64 - 1 would become -1 as int64_t.
      const bool in_range = max_tokens.is_number_unsigned()
                                ? max_tokens.get<uint64_t>() - 1 < static_cast<uint64_t>(kMaxGenerateTokens)
                            : max_tokens.is_number_integer()
                                ? max_tokens.get<int64_t>() >= 1 && max_tokens.get<int64_t>() <= kMaxGenerateTokens
                                : false;
      NVFP4LM_CHECK(in_range, "{}: \"max_tokens\" must be an integer from 1 to {}, got {}", where, kMaxGenerateTokens,
                    json_excerpt(max_tokens));
      line.max_tokens = max_tokens.get<int64_t>();
    }
    lines.push_back(std::move(line));
  }
  NVFP4LM_CHECK(!lines.empty(), "{}: no prompts (one JSON object per line: {{\"prompt\": \"...\"}})", path.string());
  return lines;
}

std::vector<BatchAnswer> run_batch(BatchEngine& engine, std::vector<SequenceSpec> specs,
                                   const std::function<void(size_t, const BatchAnswer&)>& on_done,
                                   int64_t admit_per_step) {
  for (const SequenceSpec& spec : specs) engine.check(spec);
  std::vector<BatchAnswer> answers(specs.size());
  std::map<int64_t, size_t> running;  // sequence id -> index
  auto sink = [&](size_t index) {
    return [&, index](const SequenceEvent& event) {
      BatchAnswer& answer = answers[index];
      answer.tokens.push_back(event.token);
      answer.text += event.text;
      answer.prompt_tokens = event.prompt_tokens;
      if (event.entropy) answer.entropies.push_back(*event.entropy);
      if (!event.finished) return;
      answer.stop_reason = event.stop_reason;
      answer.stop_detail = event.stop_detail;
      running.erase(event.sequence);
      if (on_done) on_done(index, answer);
    };
  };
  size_t next = 0;
  while (next < specs.size() || engine.running() > 0) {
    // admit_per_step new sequences a step while others run (see prompt_batch.h).
    int64_t admitted = 0;
    do {
      if (next == specs.size() || !engine.has_free_slot()) break;
      const size_t index = next++;
      bool finished_at_once = false;
      const int64_t id = engine.start(std::move(specs[index]), [&](const SequenceEvent& event) {
        finished_at_once = event.finished;
        sink(index)(event);
      });
      if (!finished_at_once) running[id] = index;
    } while (engine.running() == 0 || ++admitted < admit_per_step);
    engine.step([&](const SequenceEvent& event) { sink(running.at(event.sequence))(event); });
  }
  return answers;
}

std::string answer_line(size_t index, const PromptLine& line, const BatchAnswer& answer) {
  const json object = {{"index", index},
                       {"id", line.id},
                       {"text", answer.text},
                       {"tokens", answer.tokens},
                       {"prompt_tokens", answer.prompt_tokens},
                       {"finish_reason", finish_reason_name(answer.stop_reason)},
                       {"stop_reason", stop_reason_name(answer.stop_reason)}};
  return object.dump();
}

}  // namespace nvfp4lm
