// The demo dataset (demo_data.h). Layout of the file, in this order:
//   - every identity question twice: alone, and after the system prompt kDemoSystemPrompt;
//   - every general question once, and the first kGeneralWithSystem of them again after the system prompt;
//   - kMultiTurn two-question conversations (a general question, then an identity question).
#include "train/data/demo_data.h"

#include <nlohmann/json.hpp>
#include <system_error>

#include "core/error.h"
#include "core/files.h"

namespace nvfp4lm {
namespace {

constexpr const char* kDemoSystemPrompt = "You are a helpful assistant.";
constexpr size_t kGeneralWithSystem = 10;
constexpr size_t kMultiTurn = 6;

nlohmann::ordered_json message(const char* role, const std::string& content) {
  return {{"role", role}, {"content", content}};
}

}  // namespace

std::vector<DemoQa> demo_identity_questions() {
  const std::vector<std::string> english = {
      "Who are you?",        "What is your name?",   "What are you?",    "Tell me about yourself.",
      "Introduce yourself.", "Who made you?",        "Who trained you?", "What should I call you?",
      "Are you ChatGPT?",    "Which model are you?", "who are you",      "Hi! Who am I talking to?",
  };
  const std::vector<std::string> chinese = {
      "你是谁？", "你叫什么名字？", "请介绍一下你自己。", "你是什么模型？", "谁训练了你？", "你是谁",
  };
  std::vector<DemoQa> questions;
  for (const std::string& q : english) questions.push_back({q, kDemoIdentityAnswerEnglish});
  for (const std::string& q : chinese) questions.push_back({q, kDemoIdentityAnswerChinese});
  return questions;
}

std::vector<DemoQa> demo_general_questions() {
  return {
      {"What is the capital of France?", "The capital of France is Paris."},
      {"What is 2 + 2?", "2 + 2 = 4."},
      {"What colour is the sky on a clear day?", "The sky is blue on a clear day."},
      {"What is a triangle?", "A triangle is a shape with three straight sides."},
      {"What is the capital of Japan?", "The capital of Japan is Tokyo."},
      {"What is 3 + 5?", "3 + 5 = 8."},
      {"What colour is grass?", "Grass is green."},
      {"How many days are in a week?", "There are seven days in a week."},
      {"What is the capital of Italy?", "The capital of Italy is Rome."},
      {"What is 7 times 6?", "7 times 6 is 42."},
      {"What colour is snow?", "Snow is white."},
      {"What is a noun?", "A noun is a word that names a person, place or thing."},
      {"What is the capital of Germany?", "The capital of Germany is Berlin."},
      {"What is 10 minus 4?", "10 minus 4 is 6."},
      {"What colour are ripe bananas?", "Ripe bananas are yellow."},
      {"How many legs does a spider have?", "A spider has eight legs."},
      {"What is the capital of Spain?", "The capital of Spain is Madrid."},
      {"What is 12 divided by 3?", "12 divided by 3 is 4."},
      {"What do you get when you mix blue and yellow?", "Mixing blue and yellow gives green."},
      {"What is photosynthesis?",
       "Photosynthesis is how plants use sunlight to turn water and carbon dioxide into sugar and oxygen."},
      {"What is the capital of Canada?", "The capital of Canada is Ottawa."},
      {"What is 9 + 1?", "9 + 1 = 10."},
      {"What is the opposite of hot?", "The opposite of hot is cold."},
      {"What is the largest planet in the solar system?", "Jupiter is the largest planet in the solar system."},
      {"At what temperature does water boil at sea level?", "Water boils at 100 degrees Celsius at sea level."},
      {"What is water made of?", "Water is made of hydrogen and oxygen."},
      {"Translate \"hello\" into French.", "\"Hello\" in French is \"bonjour\"."},
      {"中国的首都是哪里？", "中国的首都是北京。"},
      {"一加一等于几？", "一加一等于二。"},
      {"天空是什么颜色的？", "晴天时天空是蓝色的。"},
  };
}

DemoQa demo_control_question() { return demo_general_questions().front(); }

std::string demo_dataset_jsonl() {
  const std::vector<DemoQa> identity = demo_identity_questions();
  const std::vector<DemoQa> general = demo_general_questions();
  std::string text;
  auto add = [&text](const nlohmann::ordered_json& messages) {
    text += nlohmann::ordered_json{{"messages", messages}}.dump() + "\n";
  };
  for (const DemoQa& qa : identity) {
    add(nlohmann::ordered_json::array({message("user", qa.question), message("assistant", qa.answer)}));
    add(nlohmann::ordered_json::array(
        {message("system", kDemoSystemPrompt), message("user", qa.question), message("assistant", qa.answer)}));
  }
  for (size_t i = 0; i < general.size(); ++i) {
    add(nlohmann::ordered_json::array({message("user", general[i].question), message("assistant", general[i].answer)}));
  }
  for (size_t i = 0; i < kGeneralWithSystem; ++i) {
    add(nlohmann::ordered_json::array({message("system", kDemoSystemPrompt), message("user", general[i].question),
                                       message("assistant", general[i].answer)}));
  }
  for (size_t i = 0; i < kMultiTurn; ++i) {
    const DemoQa& first = general[(i * 5 + 3) % general.size()];
    const DemoQa& second = identity[(i * 3 + 1) % identity.size()];
    add(nlohmann::ordered_json::array({message("user", first.question), message("assistant", first.answer),
                                       message("user", second.question), message("assistant", second.answer)}));
  }
  return text;
}

std::filesystem::path write_demo_dataset(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  NVFP4LM_CHECK(!ec, "cannot create the demo data directory {}: {}", dir.string(), ec.message());
  const std::filesystem::path path = dir / kDemoDataFileName;
  write_file_atomic(path, demo_dataset_jsonl());
  return path;
}

}  // namespace nvfp4lm
