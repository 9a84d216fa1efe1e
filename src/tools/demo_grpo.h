// `nvfp4lm demo --grpo`: GRPO (`train --objective grpo`, train/grpo.h) learning a verifiable reward on the CPU in
// about a minute, with nothing downloaded:
//   1. write arithmetic questions ("What is 3 plus 5?", with their answers) as a training and a held-out prompts
//      file (data/prompt_data.h's format);
//   2. synthesise the demo's tiny random Qwen3 with the bundled tokenizer (tools/demo.h demo_model_config);
//   3. train it with GRPO and the reward `regex:^[A-Z]` — the answer begins with a capital letter, as a sentence
//      does —, completions sampled by the batch decode engine from the policy's own NVFP4 forward weights
//      (tools/grpo_rollouts.h); the held-out prompts' completions are scored before and after.
// A random model's first token is about uniform over the vocabulary, and 6.5 % of Qwen3's tokens begin with an
// ASCII capital letter (9,851 of 151,936), so the held-out reward starts near 0.065; the demo passes when it ends
// above 0.9. The reward is a format rule because a model this small and this untrained cannot learn arithmetic in a
// minute; `--reward exact` is the flag for the sums (the prompts carry their "answer").
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/files.h"
#include "io/hf_config.h"

namespace nvfp4lm {

struct GrpoDemoOptions {
  fs::path work_dir;  // empty: a new directory under ./demo-run
  uint64_t seed = 0;
  int64_t steps = 0;         // 0: the demo's measured number
  std::FILE* out = stderr;   // progress and results; nullptr: silent
  bool interactive = false;  // rewrite the progress line in place (a terminal)
};

struct GrpoDemoResult {
  fs::path work_dir;
  double reward_before = 0, reward_after = 0;              // mean held-out reward
  std::vector<std::string> samples_before, samples_after;  // the first held-out prompt's completions
  std::vector<double> step_rewards;                        // mean training reward of each step
  std::string command;                                     // the `nvfp4lm train` command that makes the same run
  double seconds = 0;
  bool passed() const;  // reward_before < 0.2 and reward_after > 0.9
};

// The demo's arithmetic questions: `count` prompts from number `first` on, one JSON object a line with "prompt" and
// "answer".
std::string grpo_demo_prompts(int count, int first);

GrpoDemoResult run_grpo_demo(const GrpoDemoOptions& options);

}  // namespace nvfp4lm
