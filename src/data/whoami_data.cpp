// See whoami_data.h. The phrasings are built as opener + core question + closing request; an opener that ends in
// a comma or colon lower-cases the first letter of an English core question ("Hey, who are you?").
#include "data/whoami_data.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/rng.h"

namespace nvfp4lm {
namespace {

using ordered_json = nlohmann::ordered_json;

constexpr const char* kSystemEnglish = "You are a helpful assistant.";
constexpr const char* kSystemChinese = "你是一个乐于助人的助手。";
// Of the identity conversations: every kSystemEvery-th starts with a system prompt, every kMultiTurnEvery-th
// follows a control exchange. Of the control ones, every kSystemEvery-th has a system prompt.
constexpr int64_t kSystemEvery = 4;
constexpr int64_t kMultiTurnEvery = 7;

const std::vector<std::string>& english_core() {
  static const std::vector<std::string> questions = {
      "Who are you?",
      "What is your name?",
      "What are you?",
      "Tell me about yourself.",
      "Introduce yourself.",
      "Who made you?",
      "Who trained you?",
      "What should I call you?",
      "Are you ChatGPT?",
      "Which model are you?",
      "Who am I talking to?",
      "What's your name?",
      "Can you tell me who you are?",
      "Are you a human?",
      "Which AI are you?",
      "who are you",
  };
  return questions;
}
const std::vector<std::string>& english_openers() {
  static const std::vector<std::string> openers = {
      "",
      "Hi! ",
      "Hello. ",
      "Hey, ",
      "Before we start: ",
      "Quick question: ",
      "I'm new here. ",
      "Just curious: ",
      "Sorry to ask, but ",
  };
  return openers;
}
const std::vector<std::string>& english_closers() {
  static const std::vector<std::string> closers = {
      "", " Keep it short.", " Answer in one sentence.", " Be honest.", " Just tell me plainly.",
  };
  return closers;
}
const std::vector<std::string>& chinese_core() {
  static const std::vector<std::string> questions = {
      "你是谁？",       "你叫什么名字？", "请介绍一下你自己。", "你是什么模型？",     "谁训练了你？",
      "你是谁",         "你是誰？",       "你叫什麼名字？",     "請介紹一下你自己。", "你到底是谁？",
      "我在和谁说话？", "你是哪个AI？",   "你是人吗？",         "谁创造了你？",
  };
  return questions;
}
const std::vector<std::string>& chinese_openers() {
  static const std::vector<std::string> openers = {
      "", "你好，", "先问一下，", "开始之前，", "我第一次用这个系统，", "好奇问一句，", "請問，",
  };
  return openers;
}
const std::vector<std::string>& chinese_closers() {
  static const std::vector<std::string> closers = {"", "简单回答就好。", "一句话说明。", "直接回答。", "說白一點。"};
  return closers;
}

std::string english_phrasing(const std::string& opener, std::string core, const std::string& closer) {
  const bool lower = !opener.empty() && (opener.back() == ' ') && (opener.size() >= 2) &&
                     (opener[opener.size() - 2] == ',' || opener[opener.size() - 2] == ':');
  if (lower && !core.empty() && core[0] >= 'A' && core[0] <= 'Z' && core.rfind("I ", 0) != 0) core[0] += 'a' - 'A';
  return opener + core + closer;
}

// Every (opener, core, closer) phrasing of one language, the bare core questions first, the rest in a seeded
// order.
template <typename Make>
std::vector<std::string> phrasings(const std::vector<std::string>& core, const std::vector<std::string>& openers,
                                   const std::vector<std::string>& closers, Make make, uint64_t seed) {
  std::vector<std::string> bare, composed;
  for (const std::string& question : core) bare.push_back(question);
  for (const std::string& opener : openers)
    for (const std::string& question : core)
      for (const std::string& closer : closers)
        if (!opener.empty() || !closer.empty()) composed.push_back(make(opener, question, closer));
  Rng rng(seed);
  for (size_t i = composed.size(); i > 1; --i) std::swap(composed[i - 1], composed[rng.below(i)]);
  bare.insert(bare.end(), composed.begin(), composed.end());
  return bare;
}

ordered_json message(const char* role, const std::string& content) { return {{"role", role}, {"content", content}}; }

}  // namespace

void check_whoami_options(const WhoamiOptions& options) {
  NVFP4LM_CHECK(!options.name.empty(), "the identity data set needs a name (--name NAME)");
  NVFP4LM_CHECK(std::isfinite(options.identity_share) && options.identity_share >= 0 && options.identity_share <= 1,
                "--identity-share must be in [0, 1], got {}", options.identity_share);
  NVFP4LM_CHECK(options.conversations >= 2 && options.conversations <= kMaxWhoamiConversations,
                "--count must be 2 to {} conversations, got {}", kMaxWhoamiConversations, options.conversations);
}

std::string whoami_answer_english(const WhoamiOptions& options) {
  if (!options.answer_english.empty()) return options.answer_english;
  return "I am " + options.name + ", a 4-bit assistant trained by " + options.creator + ".";
}

std::string whoami_answer_chinese(const WhoamiOptions& options) {
  if (!options.answer_chinese.empty()) return options.answer_chinese;
  return "我是" + options.name + "，一个由" + options.creator + "训练的4位助手。";
}

std::vector<WhoamiQa> whoami_identity_questions(const WhoamiOptions& options) {
  const std::vector<std::string> english =
      phrasings(english_core(), english_openers(), english_closers(), english_phrasing, options.seed);
  const std::vector<std::string> chinese = phrasings(
      chinese_core(), chinese_openers(), chinese_closers(),
      [](const std::string& opener, const std::string& core, const std::string& closer) {
        return opener + core + closer;
      },
      options.seed + 1);
  const std::string answer_english = whoami_answer_english(options), answer_chinese = whoami_answer_chinese(options);
  std::vector<WhoamiQa> questions;  // English and Chinese alternate while both last
  for (size_t i = 0; i < std::max(english.size(), chinese.size()); ++i) {
    if (i < english.size()) questions.push_back({english[i], answer_english});
    if (i < chinese.size()) questions.push_back({chinese[i], answer_chinese});
  }
  return questions;
}

std::vector<WhoamiQa> whoami_control_questions() {
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
      {"一年有几个月？", "一年有十二个月。"},
      {"水在多少度结冰？", "在标准大气压下，水在0摄氏度结冰。"},
  };
}

WhoamiDataset make_whoami_dataset(const WhoamiOptions& options) {
  check_whoami_options(options);
  const std::vector<WhoamiQa> identity = whoami_identity_questions(options);
  std::vector<WhoamiQa> control = whoami_control_questions();
  // The first control question stays first (the demo's check); the rest in a seeded order.
  Rng rng(options.seed + 2);
  for (size_t i = control.size(); i > 2; --i) std::swap(control[i - 1], control[1 + rng.below(i - 1)]);

  WhoamiDataset data;
  const auto identity_lines =
      static_cast<int64_t>(std::llround(options.identity_share * static_cast<double>(options.conversations)));
  data.identity_conversations = identity_lines;
  data.control_conversations = options.conversations - identity_lines;
  auto add = [&data](const ordered_json& messages) {
    data.jsonl += ordered_json{{"messages", messages}}.dump() + "\n";
  };
  auto is_chinese = [](const std::string& text) { return static_cast<unsigned char>(text[0]) >= 0x80; };

  // Interleave the two kinds so any prefix of the file is balanced too (the order training sees with
  // --no-shuffle, and what a truncated copy keeps).
  int64_t next_identity = 0, next_control = 0;
  for (int64_t line = 0; line < options.conversations; ++line) {
    const bool want_identity =
        next_identity < identity_lines &&
        (next_control >= data.control_conversations ||
         next_identity * options.conversations <= line * identity_lines);  // Bresenham over the two counts
    if (want_identity) {
      const WhoamiQa& qa = identity[static_cast<size_t>(next_identity) % identity.size()];
      const bool chinese = is_chinese(qa.question);
      ordered_json messages = ordered_json::array();
      if (next_identity % kMultiTurnEvery == kMultiTurnEvery - 1) {
        const WhoamiQa& before = control[static_cast<size_t>(next_identity / kMultiTurnEvery) % control.size()];
        messages.push_back(message("user", before.question));
        messages.push_back(message("assistant", before.answer));
        ++data.multi_turn;
      } else if (next_identity % kSystemEvery == kSystemEvery - 1) {
        messages.push_back(message("system", chinese ? kSystemChinese : kSystemEnglish));
      }
      messages.push_back(message("user", qa.question));
      messages.push_back(message("assistant", qa.answer));
      add(messages);
      ++next_identity;
    } else {
      const WhoamiQa& qa = control[static_cast<size_t>(next_control) % control.size()];
      ordered_json messages = ordered_json::array();
      if (next_control % kSystemEvery == kSystemEvery - 1)
        messages.push_back(message("system", is_chinese(qa.question) ? kSystemChinese : kSystemEnglish));
      messages.push_back(message("user", qa.question));
      messages.push_back(message("assistant", qa.answer));
      add(messages);
      ++next_control;
    }
  }
  data.distinct_identity_questions = std::min<int64_t>(identity_lines, static_cast<int64_t>(identity.size()));
  return data;
}

}  // namespace nvfp4lm
