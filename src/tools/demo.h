// `nvfp4lm demo`: the whole pipeline on bundled data, on the CPU, in a few minutes, with nothing downloaded:
//   1. write the identity data set of `nvfp4lm data whoami` (data/whoami_data.h) for the name "Nova" into the
//      work directory;
//   2. synthesise a tiny random Qwen3 with the real tokenizer's vocabulary (io/synth_model.h; the bundled Qwen3
//      tokenizer is copied beside it);
//   3. train it with NVFP4 QAT (w4a16) on the CPU with the training loop of `nvfp4lm train` (trainer.h);
//   4. export NVFP4 in the ModelOpt layout, reload the export with Qwen3Model and answer, greedily, the identity
//      question in English and in Chinese and a control question, each compared with its trained answer.
// The questions are rendered with the same chat-template rule as the training data (chat_template_choice.h).
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "core/files.h"
#include "data/whoami_data.h"
#include "io/hf_config.h"
#include "model/qwen3_model.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"
#include "train/trainer.h"

namespace nvfp4lm {

// The demo model: vocabulary 151936 (the bundled tokenizer), F32 weights, small enough to learn the demo data on
// two CPU cores within the time budget.
Qwen3Config demo_model_config();
// The demo's data set: the name Nova, trained by nvfp4lm, 84 conversations.
WhoamiOptions demo_whoami_options();
// What the demo asks after training, with the trained answers: "Who are you?", "你是谁？" and the first control
// question.
std::vector<WhoamiQa> demo_questions();

struct DemoOptions {
  fs::path work_dir;  // empty: a new directory under ./demo-run
  Qwen3Config model = demo_model_config();
  int64_t epochs = 0;  // 0: kDemoEpochs
  double lr = 0;       // 0: kDemoLr
  uint64_t seed = 0;
  std::FILE* out = stderr;   // progress and results; nullptr: silent
  bool interactive = false;  // rewrite the progress line in place (a terminal)
};

struct DemoAnswer {
  std::string question;
  std::string expected;
  std::string answer;
  bool correct = false;
};

struct DemoResult {
  fs::path work_dir;
  fs::path export_dir;
  TrainSummary training;
  std::vector<double> losses;  // per step
  std::vector<DemoAnswer> answers;
  double seconds = 0;
  bool passed() const;  // every answer is the trained one
};

DemoResult run_demo(const DemoOptions& options);

}  // namespace nvfp4lm
