// See prompt_data.h.
#include "data/prompt_data.h"

#include <algorithm>

#include "core/error.h"
#include "core/json_text.h"
#include "data/dataset_records.h"
#include "tokenizer/chat.h"

namespace nvfp4lm {
namespace {

using ordered_json = nlohmann::ordered_json;

std::vector<int32_t> prompt_tokens(const ordered_json& object, const std::string& place, const Tokenizer& tokenizer,
                                   const data::Rendering& rendering) {
  NVFP4LM_CHECK(object.is_object(), "{}: expected a JSON object with \"prompt\" or \"messages\", got {}", place,
                object.type_name());
  const bool has_prompt = object.contains("prompt"), has_messages = object.contains("messages");
  NVFP4LM_CHECK(has_prompt != has_messages, "{}: give exactly one of \"prompt\" (text) and \"messages\"", place);
  if (has_prompt && object["prompt"].is_string()) {
    const std::string text = object["prompt"].get<std::string>();
    NVFP4LM_CHECK(!data::is_blank(text), "{}: \"prompt\" is empty", place);
    if (rendering.pair_template == PairTemplate::Raw) return tokenizer.encode(text);
    const ChatMessage message{"user", text};
    return encode_generation_prompt(tokenizer, *rendering.chat_template, std::span(&message, 1));
  }
  const ordered_json& messages = has_prompt ? object["prompt"] : object["messages"];
  NVFP4LM_CHECK(rendering.pair_template != PairTemplate::Raw,
                "{}: a conversation needs the chat template; drop --data-template raw or give \"prompt\" as text",
                place);
  return encode_generation_prompt(tokenizer, *rendering.chat_template, read_chat_messages(messages, place));
}

}  // namespace

PromptData read_prompt_data(const std::filesystem::path& path, const Tokenizer& tokenizer,
                            const DatasetOptions& options) {
  const DataFormat format = detect_data_format(path, options.format);
  NVFP4LM_CHECK(format == DataFormat::Jsonl,
                "prompts {} are read as {}; GRPO prompts are JSON lines (.jsonl / .json) of {{\"prompt\": ...}}",
                path.string(), data_format_name(format));
  PromptData data = parse_prompt_data(data::read_dataset_text(path), path.string(), tokenizer, options);
  data.summary.path = path;
  return data;
}

PromptData parse_prompt_data(const std::string& content, const std::string& name, const Tokenizer& tokenizer,
                             const DatasetOptions& options) {
  const data::Rendering rendering = data::rendering_for(tokenizer, options, data::RecordKind::Chat);
  std::vector<std::pair<int64_t, ordered_json>> objects;  // (line or entry, object)
  const size_t first = content.find_first_not_of(" \t\r\n");
  const bool by_entry = first != std::string::npos && content[first] == '[';
  if (by_entry) {
    OrderedJsonParseResult parsed = try_parse_ordered_json(content);
    NVFP4LM_CHECK(parsed.ok(), "{}: bad JSON (read as one JSON array because it starts with '['): {}", name,
                  parsed.error);
    for (size_t i = 0; i < parsed.value.size(); ++i) objects.emplace_back(static_cast<int64_t>(i) + 1, parsed.value[i]);
  } else {
    for (const data::Line& line : data::split_lines(content)) {
      if (data::is_blank(line.text)) continue;
      OrderedJsonParseResult parsed = try_parse_ordered_json(line.text);
      NVFP4LM_CHECK(parsed.ok(), "{}: bad JSON: {} (each line must be one complete JSON object)",
                    data::where(name, line.number), parsed.error);
      objects.emplace_back(line.number, std::move(parsed.value));
    }
  }
  PromptData data;
  DatasetSummary& summary = data.summary;
  summary.path = name;
  summary.format = DataFormat::Jsonl;
  summary.records = static_cast<int64_t>(objects.size());
  summary.max_tokens = options.max_tokens;
  for (auto& [line, object] : objects) {
    const std::string place = data::where(name, line, by_entry);
    Sample sample;
    sample.source_line = line;
    sample.ids = prompt_tokens(object, place, tokenizer, rendering);
    NVFP4LM_CHECK(!sample.ids.empty(), "{}: the prompt renders as no token", place);
    const auto length = static_cast<int64_t>(sample.ids.size());
    if (options.max_tokens > 0 && length > options.max_tokens) {
      NVFP4LM_CHECK(!options.strict, "{}: the prompt has {} tokens, more than --seq-len {} (strict mode)", place,
                    length, options.max_tokens);
      ++summary.skipped_no_trained_tokens;
      continue;
    }
    sample.train_mask.assign(sample.ids.size(), 0);
    summary.tokens += length;
    summary.longest_sample_tokens = std::max(summary.longest_sample_tokens, length);
    data.samples.push_back(std::move(sample));
    data.records.push_back(nlohmann::json::parse(object.dump()));
  }
  summary.samples = static_cast<int64_t>(data.samples.size());
  NVFP4LM_CHECK(summary.samples > 0, "prompts {}: none to train on ({} read, {} longer than --seq-len {})", name,
                summary.records, summary.skipped_no_trained_tokens, options.max_tokens);
  return data;
}

}  // namespace nvfp4lm
