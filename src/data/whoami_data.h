// The identity ("who am I") data set of `nvfp4lm data whoami` and the demo: JSON lines with "messages"
// (dataset.h) that teach a model to answer "who are you?" with a fixed self-description naming it, in English and
// in Chinese, balanced with control questions (arithmetic, capitals, colours, definitions) paired with their
// ordinary answers, so the other answers stay as they were through the fine-tune — the recipe of the F#
// predecessor's WhoAmI data generator, for any name.
//
// Composition of `conversations` lines (deterministic for a given WhoamiOptions):
//   - identity_share of them ask who the model is: English and Chinese alternate; each is one phrasing of the
//     question (a core question, optionally with an opener and a closing request: hundreds of distinct
//     phrasings), the canonical core questions ("Who are you?", "你是谁？", ...) first, every phrasing at most once
//     until all were used; some start with a system prompt, some follow an earlier control exchange (multi-turn);
//   - the rest are control questions in a seeded order, each at least once before any repeats (the first is
//     always "What is the capital of France?"), some with a system prompt.
// The answer to every English identity question is answer_english(), to every Chinese one answer_chinese().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nvfp4lm {

struct WhoamiQa {
  std::string question;
  std::string answer;
};

// The most conversations a set may have: the file is built in memory (~250 bytes a line, ~250 MiB at the limit, a
// few seconds); 2^24 took 4.5 GB and 7 minutes. Far more than an identity set needs (the default is 400).
inline constexpr int64_t kMaxWhoamiConversations = int64_t{1} << 20;

struct WhoamiOptions {
  std::string name = "Nova";        // who the model says it is
  std::string creator = "nvfp4lm";  // who it says trained it
  std::string answer_english;       // empty: "I am NAME, a 4-bit assistant trained by CREATOR."
  std::string answer_chinese;       // empty: "我是NAME，一个由CREATOR训练的4位助手。"
  int64_t conversations = 400;      // lines of the file
  double identity_share = 0.5;      // of them about identity (0..1); the rest are control questions
  uint64_t seed = 0;                // order of phrasings and control questions
};

// Error naming the option when a value cannot make a data set (empty name, share outside [0, 1], too few lines).
void check_whoami_options(const WhoamiOptions& options);

std::string whoami_answer_english(const WhoamiOptions& options);
std::string whoami_answer_chinese(const WhoamiOptions& options);

// Every identity phrasing with its answer, English and Chinese alternating, each language's bare core questions
// before its composed phrasings.
std::vector<WhoamiQa> whoami_identity_questions(const WhoamiOptions& options);
// The control questions with their ordinary answers; the first is the demo's check
// ("What is the capital of France?" -> "The capital of France is Paris.").
std::vector<WhoamiQa> whoami_control_questions();

struct WhoamiDataset {
  std::string jsonl;  // the file's contents
  int64_t identity_conversations = 0;
  int64_t control_conversations = 0;
  int64_t multi_turn = 0;  // identity conversations that follow a control exchange
  int64_t distinct_identity_questions = 0;
};

WhoamiDataset make_whoami_dataset(const WhoamiOptions& options);

}  // namespace nvfp4lm
