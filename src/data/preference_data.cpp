// See preference_data.h. Records are parsed here; rendering and tokenization are read_dataset's own
// (data/dataset_records.h), so a pair's completions are the tokens SFT would train for the same conversation.
#include "data/preference_data.h"

#include <algorithm>
#include <exception>

#include "core/error.h"
#include "core/json_text.h"
#include "core/text_excerpt.h"
#include "data/dataset_records.h"

namespace nvfp4lm {
namespace {

using data::RawRecord;
using data::RecordKind;
using ordered_json = nlohmann::ordered_json;

struct PreferenceRecord {
  int64_t line = 0;
  RawRecord chosen, rejected;
};

// A completion given as a list: exactly one assistant message.
ordered_json one_assistant_message(const ordered_json& value, const char* key, const std::string& place) {
  NVFP4LM_CHECK(value.is_array() && value.size() == 1,
                "{}: \"{}\" is {}; a conversational completion is a list of one assistant message", place, key,
                value.is_array() ? fmt::format("a list of {} messages", value.size()) : value.type_name());
  const ordered_json& message = value[0];
  NVFP4LM_CHECK(message.is_object() && message.contains("role") && message["role"] == "assistant",
                "{}: \"{}\" holds a message whose role is not \"assistant\"; the completion a preference pair "
                "scores is the assistant's",
                place, key);
  return message;
}

// A completion as an assistant message: a string is the message's content.
ordered_json completion_message(const ordered_json& value, const char* key, const std::string& place) {
  if (value.is_string()) {
    NVFP4LM_CHECK(!data::is_blank(value.get<std::string>()), "{}: \"{}\" is empty; a pair compares two completions",
                  place, key);
    return ordered_json{{"role", "assistant"}, {"content", value}};
  }
  return one_assistant_message(value, key, place);
}

RawRecord chat_record(ordered_json messages, const ordered_json& completion, const ordered_json& tools,
                      const std::string& place) {
  messages.push_back(completion);
  RawRecord record;
  record.kind = RecordKind::Chat;
  record.messages = read_chat_messages(messages, place);
  record.tools = tools;
  return record;
}

PreferenceRecord preference_record(const ordered_json& object, const std::string& place) {
  NVFP4LM_CHECK(object.is_object(), "{}: expected a JSON object ({{\"prompt\", \"chosen\", \"rejected\"}}), got {}",
                place, object.type_name());
  for (const char* key : {"chosen", "rejected"})
    NVFP4LM_CHECK(object.contains(key), "{}: missing \"{}\"; a preference pair has \"chosen\" and \"rejected\"", place,
                  key);
  const ordered_json& chosen = object["chosen"];
  const ordered_json& rejected = object["rejected"];
  NVFP4LM_CHECK(!(object.contains("prompt") && object.contains("messages")),
                "{}: has both \"prompt\" and \"messages\"; use one for the prompt", place);
  ordered_json tools;
  if (object.contains("tools") && !object["tools"].is_null()) {
    check_chat_tools(object["tools"], place);
    tools = object["tools"];
  }
  PreferenceRecord record;
  const char* prompt_key = object.contains("prompt") ? "prompt" : object.contains("messages") ? "messages" : nullptr;
  if (prompt_key != nullptr && object[prompt_key].is_string()) {  // standard: prompt and completions as text
    NVFP4LM_CHECK(chosen.is_string() && rejected.is_string(),
                  "{}: \"prompt\" is text, so \"chosen\" and \"rejected\" must be text too (or give the prompt as a "
                  "list of messages)",
                  place);
    for (auto [out, value, key] :
         {std::tuple{&record.chosen, &chosen, "chosen"}, std::tuple{&record.rejected, &rejected, "rejected"}}) {
      NVFP4LM_CHECK(!data::is_blank(value->get<std::string>()), "{}: \"{}\" is empty; a pair compares two completions",
                    place, key);
      out->kind = RecordKind::Pair;
      out->prompt = object[prompt_key].get<std::string>();
      out->target = value->get<std::string>();
    }
    return record;
  }
  ordered_json prompt;
  ordered_json chosen_completion, rejected_completion;
  if (prompt_key != nullptr) {
    NVFP4LM_CHECK(object[prompt_key].is_array() && !object[prompt_key].empty(),
                  "{}: \"{}\" is {}, expected text or a non-empty list of messages", place, prompt_key,
                  object[prompt_key].type_name());
    prompt = object[prompt_key];
    chosen_completion = completion_message(chosen, "chosen", place);
    rejected_completion = completion_message(rejected, "rejected", place);
  } else {  // implicit prompt: the conversations' longest common prefix (TRL data_utils.py extract_prompt)
    NVFP4LM_CHECK(chosen.is_array() && rejected.is_array(),
                  "{}: no \"prompt\"; then \"chosen\" and \"rejected\" must be whole conversations (lists of "
                  "messages) sharing their prompt",
                  place);
    size_t shared = 0;
    while (shared < chosen.size() && shared < rejected.size() && chosen[shared] == rejected[shared]) ++shared;
    NVFP4LM_CHECK(shared > 0, "{}: \"chosen\" and \"rejected\" share no first message, so there is no prompt", place);
    prompt = ordered_json::array();
    for (size_t i = 0; i < shared; ++i) prompt.push_back(chosen[i]);
    auto rest = [&](const ordered_json& conversation) {
      ordered_json tail = ordered_json::array();
      for (size_t i = shared; i < conversation.size(); ++i) tail.push_back(conversation[i]);
      return tail;
    };
    chosen_completion = one_assistant_message(rest(chosen), "chosen", place + " (after the shared prompt)");
    rejected_completion = one_assistant_message(rest(rejected), "rejected", place + " (after the shared prompt)");
  }
  record.chosen = chat_record(prompt, chosen_completion, tools, place);
  record.rejected = chat_record(prompt, rejected_completion, tools, place);
  return record;
}

std::vector<PreferenceRecord> parse_preference_records(std::string_view content, const std::string& file,
                                                       bool& numbered_by_entry) {
  std::vector<PreferenceRecord> records;
  const size_t first = content.find_first_not_of(" \t\r\n");
  numbered_by_entry = first != std::string_view::npos && content[first] == '[';
  if (numbered_by_entry) {
    OrderedJsonParseResult parsed = try_parse_ordered_json(content);
    NVFP4LM_CHECK(parsed.ok(), "{}: bad JSON (read as one JSON array because it starts with '['): {}", file,
                  parsed.error);
    for (size_t i = 0; i < parsed.value.size(); ++i) {
      const auto entry = static_cast<int64_t>(i) + 1;
      records.push_back(preference_record(parsed.value[i], data::where(file, entry, true)));
      records.back().line = entry;
    }
    return records;
  }
  for (const data::Line& line : data::split_lines(content)) {
    if (data::is_blank(line.text)) continue;
    const std::string place = data::where(file, line.number);
    OrderedJsonParseResult parsed = try_parse_ordered_json(line.text);
    NVFP4LM_CHECK(parsed.ok(), "{}: bad JSON: {} (each line must be one complete JSON object)", place, parsed.error);
    records.push_back(preference_record(parsed.value, place));
    records.back().line = line.number;
  }
  return records;
}

}  // namespace

PreferenceData read_preference_data(const std::filesystem::path& path, const Tokenizer& tokenizer,
                                    const DatasetOptions& options) {
  const DataFormat format = detect_data_format(path, options.format);
  NVFP4LM_CHECK(format == DataFormat::Jsonl,
                "preference data {} is read as {}; preference pairs are JSON lines (.jsonl / .json) of {{\"prompt\", "
                "\"chosen\", \"rejected\"}}",
                path.string(), data_format_name(format));
  PreferenceData data = parse_preference_data(data::read_dataset_text(path), path.string(), tokenizer, options);
  data.summary.path = path;
  return data;
}

PreferenceData parse_preference_data(const std::string& content, const std::string& name, const Tokenizer& tokenizer,
                                     const DatasetOptions& options) {
  bool numbered_by_entry = false;
  const std::vector<PreferenceRecord> records = parse_preference_records(content, name, numbered_by_entry);
  // Only the final assistant message is the completion; everything before it is the prompt.
  DatasetOptions rendering_options = options;
  rendering_options.train_all_assistant_turns = false;
  const data::Rendering rendering = data::rendering_for(tokenizer, rendering_options, RecordKind::Chat);
  if (options.pair_template == PairTemplate::Raw)
    NVFP4LM_CHECK(rendering.eos >= 0,
                  "preference data {}: the raw template needs an EOS token, and tokenizer {} has none", name,
                  tokenizer.origin());

  const auto count = static_cast<int64_t>(records.size());
  std::vector<std::vector<Sample>> tokenized(2 * records.size());
  std::vector<std::string> errors(records.size());
#pragma omp parallel for schedule(dynamic, 8)
  for (int64_t i = 0; i < count; ++i) {
    const PreferenceRecord& record = records[static_cast<size_t>(i)];
    try {
      tokenized[2 * static_cast<size_t>(i)] = data::tokenize(record.chosen, tokenizer, rendering);
      tokenized[2 * static_cast<size_t>(i) + 1] = data::tokenize(record.rejected, tokenizer, rendering);
    } catch (const std::exception& e) {
      errors[static_cast<size_t>(i)] = e.what();
    }
  }

  PreferenceData data;
  DatasetSummary& summary = data.summary;
  summary.path = name;
  summary.format = DataFormat::Jsonl;
  summary.preference_pairs = true;
  summary.records = count;
  summary.max_tokens = options.max_tokens;
  for (size_t i = 0; i < records.size(); ++i) {
    const std::string place = data::where(name, records[i].line, numbered_by_entry);
    NVFP4LM_CHECK(errors[i].empty(), "{}: {}", place, errors[i]);
    Sample pair[2];
    bool empty = false;
    for (size_t k = 0; k < 2; ++k) {
      std::vector<Sample>& samples = tokenized[2 * i + k];
      NVFP4LM_ASSERT(samples.size() == 1, "{}: a completion rendered as {} samples", place, samples.size());
      Sample& sample = pair[k] = std::move(samples[0]);
      sample.source_line = records[i].line;
      const auto length = static_cast<int64_t>(sample.ids.size());
      if (options.max_tokens > 0 && length > options.max_tokens) {
        NVFP4LM_CHECK(!options.strict,
                      "{}: the {} completion has {} tokens with its prompt, more than seq_len {} (strict mode; "
                      "without it the completion is cut)",
                      place, k == 0 ? "chosen" : "rejected", length, options.max_tokens);
        ++summary.truncated;
        sample.ids.resize(static_cast<size_t>(options.max_tokens));
        sample.train_mask.resize(static_cast<size_t>(options.max_tokens));
      }
      if (trained_token_count(sample) == 0) empty = true;
    }
    if (empty) {
      NVFP4LM_CHECK(!options.strict,
                    "{}: a completion has no token left to score (its prompt fills seq_len {}); strict mode", place,
                    options.max_tokens);
      ++summary.skipped_no_trained_tokens;
      continue;
    }
    for (Sample& sample : pair) {
      summary.tokens += static_cast<int64_t>(sample.ids.size());
      summary.trained_tokens += trained_token_count(sample);
      summary.longest_sample_tokens = std::max<int64_t>(summary.longest_sample_tokens, sample.ids.size());
      data.samples.push_back(std::move(sample));
    }
  }
  summary.samples = static_cast<int64_t>(data.samples.size());
  NVFP4LM_CHECK(summary.samples > 0, "preference data {}: no pair to train on ({} read, {} with an empty completion)",
                name, summary.records, summary.skipped_no_trained_tokens);
  return data;
}

}  // namespace nvfp4lm
