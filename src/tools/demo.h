// `nvfp4lm demo`: the whole pipeline on bundled data, on the CPU, in a few minutes, with nothing downloaded:
//   1. write the identity data set of `nvfp4lm data whoami` (data/whoami_data.h) for the name "Nova" into the
//      work directory;
//   2. synthesise a tiny random Qwen3 with the real tokenizer's vocabulary (io/synth_model.h; the bundled Qwen3
//      tokenizer is copied beside it);
//   3. train it with NVFP4 QAT (w4a16) on the CPU with the training loop of `nvfp4lm train` (trainer.h);
//   4. export NVFP4 in the ModelOpt layout, reload the export with Qwen3Model and answer, greedily, the identity
//      question in English and in Chinese and a control question, each compared with its trained answer.
// The questions are rendered with the same chat-template rule as the training data (chat_template_choice.h).
//
// With lora_rank (`nvfp4lm demo --lora R`), the QLoRA workflow instead: the random model is quantized to an NVFP4
// (ModelOpt) base first, rank-R adapters are trained over it while it stays frozen and packed (model/lora.h), the
// adapter is exported in PEFT's format, and the questions are answered by the base with the adapter applied at run
// time (model/lora_runtime.h), as `generate --lora` does; the base's file is checked unchanged. Adapters leave the
// embedding and the head as they are, and a random head at HF's initializer range (0.02) gives a logit of at most
// about 2.6 (hidden 128) even to the token a hidden state points at, so no hidden state can make one token likely;
// the LoRA base is therefore synthesised with a wider embedding (std 0.1: up to about 13, as a trained model's).
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
  int64_t lora_rank = 0;     // 0: full-parameter QAT; R: LoRA adapters of rank R (alpha 4R) over an NVFP4 base
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
  fs::path export_dir;         // the NVFP4 model; with lora_rank, the PEFT adapter
  fs::path base_dir;           // with lora_rank: the NVFP4 base the adapter was trained over
  bool base_unchanged = true;  // with lora_rank: the base's weight file has the same bytes after training
  TrainSummary training;
  std::vector<double> losses;  // per step
  std::vector<DemoAnswer> answers;
  double seconds = 0;
  bool passed() const;  // every answer is the trained one (and, with lora_rank, the base unchanged)
};

DemoResult run_demo(const DemoOptions& options);

}  // namespace nvfp4lm
