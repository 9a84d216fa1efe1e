// The demo's training data: a small identity dataset (JSON lines with "messages", dataset.h) that teaches a model
// to answer "who are you?" in English and Chinese with a fixed self-description naming it "Nova", mixed with
// ordinary short question/answer pairs (arithmetic, capitals, colours, definitions) so that other answers
// survive the fine-tune. Everything is fixed text in a fixed order: the file is byte-identical on every run.
// Small on purpose (about 90 short conversations) so the demo trains a tiny model on a CPU in minutes.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace nvfp4lm {

struct DemoQa {
  std::string question;
  std::string answer;
};

inline constexpr const char* kDemoModelName = "Nova";
inline constexpr const char* kDemoIdentityAnswerEnglish = "I am Nova, a 4-bit assistant trained by nvfp4lm.";
inline constexpr const char* kDemoIdentityAnswerChinese = "我是Nova，一个由nvfp4lm训练的4位助手。";
inline constexpr const char* kDemoDataFileName = "demo_identity.jsonl";

// The identity questions of the dataset, each with its expected answer (English or Chinese).
std::vector<DemoQa> demo_identity_questions();
// The ordinary question/answer pairs mixed in.
std::vector<DemoQa> demo_general_questions();
// A general question that is in the data, whose answer should be unchanged by the identity training:
// "What is the capital of France?" -> "The capital of France is Paris."
DemoQa demo_control_question();

// Writes <dir>/demo_identity.jsonl (creating dir; replacing an older copy of that file atomically) and returns
// its path.
std::filesystem::path write_demo_dataset(const std::filesystem::path& dir);
// The file's contents (what write_demo_dataset writes).
std::string demo_dataset_jsonl();

}  // namespace nvfp4lm
