// Shared by the trainer tests (tests/train/test_trainer_*.cpp) and the train CLI test (tests/cli/test_train_cli.cpp):
// the 512-token fixture model (tests/fixtures/qwen3-tiny) with the 512-token tokenizer cut from Qwen3's
// (tests/fixtures/tiny-tokenizer), small prompt/completion datasets written into a test's directory, TrainOptions
// for runs of a few milliseconds a step, metrics.jsonl reading and bytewise tensor comparison.
// Header-only (inline) because tests/<layer>/ globs only test_*.cpp into each layer's executable.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "model/parameter.h"
#include "train/train_options.h"
#include "train/trainer.h"

namespace nvfp4lm::test {

inline fs::path tiny_model_dir() { return fixture_path("qwen3-tiny"); }
inline fs::path tiny_tokenizer_dir() { return fixture_path("tiny-tokenizer"); }

// `count` prompt/completion pairs of additions ("What is 3 plus 4?" -> "3 plus 4 is 7."), one JSON object a line,
// each about 37 tokens in the chat rendering with the tiny tokenizer.
inline fs::path write_pairs_jsonl(const fs::path& path, int count) {
  std::string text;
  for (int i = 0; i < count; ++i) {
    const int a = 2 + i % 8, b = 3 + 2 * (i / 8);
    text += nlohmann::json{{"prompt", fmt::format("What is {} plus {}?", a, b)},
                           {"completion", fmt::format("{} plus {} is {}.", a, b, a + b)}}
                .dump() +
            "\n";
  }
  write_file(path, text);
  return path;
}

// `count` preference pairs of additions (data/preference_data.h, TRL's standard layout): the question of
// write_pairs_jsonl, its answer as chosen and a refusal as rejected (varied, so no single token gives it away);
// `offset` shifts the numbers, for held-out pairs with other questions.
inline fs::path write_preference_jsonl(const fs::path& path, int count, int offset = 0) {
  static const char* const refusals[] = {"I do not know.", "No idea, sorry.", "Ask someone else.", "I will not say."};
  std::string text;
  for (int i = 0; i < count; ++i) {
    const int a = 2 + (i + offset) % 8, b = 3 + 2 * ((i + offset) / 8);
    text += nlohmann::json{{"prompt", fmt::format("What is {} plus {}?", a, b)},
                           {"chosen", fmt::format("{} plus {} is {}.", a, b, a + b)},
                           {"rejected", refusals[i % 4]}}
                .dump() +
            "\n";
  }
  write_file(path, text);
  return path;
}

// A short QAT (w4a16) run of the fixture model on `data`: rows of 64 tokens (one sample a row: two do not fit),
// 2 rows a batch, 6 steps, a learning rate large enough to move the weights visibly in a few steps.
inline TrainOptions tiny_train_options(const fs::path& data, const fs::path& output) {
  TrainOptions options;
  options.model = tiny_model_dir().string();
  options.tokenizer = tiny_tokenizer_dir().string();
  options.data = data.string();
  options.output = output.string();
  options.seq_len = 64;
  options.batch = 2;
  options.max_steps = 6;
  options.lr = 2e-3;
  options.warmup = 1;
  options.seed = 5;
  return options;
}

// The same run as `nvfp4lm train` flags (without --output), for the CLI tests. `changed` replaces flag values
// ({"--lr", "-1"}), adds flags, or drops a flag (an empty value).
inline std::string tiny_train_flags(const fs::path& data, const std::map<std::string, std::string>& changed = {}) {
  auto quoted = [](const fs::path& path) { return fmt::format("'{}'", path.string()); };
  std::vector<std::pair<std::string, std::string>> flags = {{"--model", quoted(tiny_model_dir())},
                                                            {"--tokenizer", quoted(tiny_tokenizer_dir())},
                                                            {"--data", quoted(data)},
                                                            {"--seq-len", "64"},
                                                            {"--batch", "2"},
                                                            {"--max-steps", "6"},
                                                            {"--lr", "2e-3"},
                                                            {"--warmup", "1"},
                                                            {"--seed", "5"}};
  for (const auto& [flag, value] : changed) {
    const std::string& name = flag;  // clang < 16 cannot capture a structured binding
    auto it = std::find_if(flags.begin(), flags.end(), [&](const auto& entry) { return entry.first == name; });
    if (it == flags.end()) {
      flags.emplace_back(flag, value);
    } else {
      it->second = value;
    }
  }
  std::string text;
  for (const auto& [flag, value] : flags) {
    if (value.empty()) continue;
    text += fmt::format("{}{} {}", text.empty() ? "" : " ", flag, value);
  }
  return text;
}

// Runs the trainer to the end, recording every step's metrics.
struct RecordedRun {
  TrainSummary summary;
  std::vector<StepMetrics> steps;
};
inline RecordedRun run_recording_steps(Trainer& trainer) {
  RecordedRun run;
  Trainer::Progress progress;
  progress.on_step = [&](const StepMetrics& m) { run.steps.push_back(m); };
  run.summary = trainer.run(progress);
  return run;
}

// The bytes of every tensor (copied to the host, contiguous), by name.
inline std::map<std::string, std::string> tensor_bytes(std::span<const NamedTensor> tensors) {
  std::map<std::string, std::string> bytes;
  for (const NamedTensor& entry : tensors) {
    const Tensor host = (entry.tensor.device().is_cpu() ? entry.tensor : entry.tensor.to(Device::cpu())).contiguous();
    bytes[entry.name].assign(static_cast<const char*>(host.raw()), host.nbytes());
  }
  return bytes;
}

// Adds a failure naming every tensor whose bytes differ (or that only one side has).
inline void expect_same_bytes(const std::map<std::string, std::string>& actual,
                              const std::map<std::string, std::string>& expected, const std::string& what) {
  EXPECT_EQ(actual.size(), expected.size()) << what;
  for (const auto& [name, bytes] : expected) {
    auto it = actual.find(name);
    if (it == actual.end()) {
      ADD_FAILURE() << what << ": tensor " << name << " is missing";
    } else if (it->second != bytes) {
      size_t first = 0;
      while (first < bytes.size() && first < it->second.size() && bytes[first] == it->second[first]) ++first;
      ADD_FAILURE() << what << ": tensor " << name << " differs (first differing byte " << first << " of "
                    << bytes.size() << ")";
    }
  }
}

// The first line of `text` containing `needle`, or "".
inline std::string line_with(const std::string& text, const std::string& needle) {
  const size_t at = text.find(needle);
  if (at == std::string::npos) return "";
  const size_t begin = text.rfind('\n', at);
  const size_t end = text.find('\n', at);
  return text.substr(begin == std::string::npos ? 0 : begin + 1,
                     (end == std::string::npos ? text.size() : end) - (begin == std::string::npos ? 0 : begin + 1));
}

}  // namespace nvfp4lm::test
