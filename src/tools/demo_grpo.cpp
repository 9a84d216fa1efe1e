// See demo_grpo.h. The settings (lr, steps, completions a prompt) were chosen by measurement on a 2-core CPU: the
// fewest steps after which the held-out reward is above 0.9 with room to spare, for several seeds.
#include "tools/demo_grpo.h"

#include <algorithm>
#include <optional>
#include <set>

#include "core/files.h"
#include "core/logging.h"
#include "core/stopwatch.h"
#include "io/synth_model.h"
#include "tools/demo.h"
#include "tools/grpo_rollouts.h"
#include "train/metrics.h"
#include "train/trainer.h"

namespace nvfp4lm {
namespace {

constexpr int kTrainPrompts = 32;
constexpr int kHeldOutPrompts = 8;
constexpr int kHeldOutFirst = 100;  // held-out questions use other numbers than the training ones
constexpr int64_t kGenerations = 8;
constexpr int64_t kCompletionTokens = 4;  // the rule reads the first letter only
constexpr int64_t kPromptsPerStep = 4;
constexpr int64_t kSteps = 20;
constexpr double kLr = 5e-2;
constexpr int64_t kWarmup = 5;
constexpr const char* kReward = "regex:^[A-Z]";

void line(std::FILE* out, const std::string& text) {
  if (out == nullptr) return;
  std::fputs((text + "\n").c_str(), out);
  std::fflush(out);
}

std::string quoted(const std::string& text) { return "'" + text + "'"; }

// A completion shown on one line: control characters escaped, at most 60 bytes.
std::string sample_text(const std::string& text) {
  std::string one_line = nlohmann::json(text).dump();
  if (one_line.size() > 60) one_line = one_line.substr(0, 57) + "...";
  return one_line;
}

// Question i: "What is a plus b?".
std::pair<int, int> addends(int i) { return {2 + i % 9, 3 + (i / 9) % 40}; }

std::string question(int i) { return fmt::format("What is {} plus {}?", addends(i).first, addends(i).second); }

std::string samples_line(const std::vector<std::string>& samples) {
  std::string text;
  for (size_t i = 0; i < samples.size() && i < 4; ++i) text += (i ? ", " : "") + sample_text(samples[i]);
  return text;
}

}  // namespace

std::string grpo_demo_prompts(int count, int first) {
  std::string text;
  for (int i = first; i < first + count; ++i) {
    text += nlohmann::json{{"prompt", question(i)}, {"answer", addends(i).first + addends(i).second}}.dump() + "\n";
  }
  return text;
}

bool GrpoDemoResult::passed() const { return reward_before < 0.2 && reward_after > 0.9; }

GrpoDemoResult run_grpo_demo(const GrpoDemoOptions& options) {
  const Clock::time_point start = Clock::now();
  std::FILE* out = options.out;
  GrpoDemoResult result;
  result.work_dir = options.work_dir.empty()
                        ? create_fresh_directory(fs::path("demo-run") / ("grpo-" + local_time_stamp()))
                        : options.work_dir;
  std::error_code ec;
  NVFP4LM_CHECK(!fs::exists(result.work_dir / "run", ec),
                "demo work directory {} already holds a run; choose a new --work-dir", result.work_dir.string());
  fs::create_directories(result.work_dir / "data", ec);
  NVFP4LM_CHECK(!ec, "cannot create the demo work directory {}: {}", result.work_dir.string(), ec.message());
  line(out, fmt::format("nvfp4lm demo --grpo: work directory {}", result.work_dir.string()));

  // 1. Prompts.
  const fs::path prompts = result.work_dir / "data" / "prompts.jsonl";
  const fs::path held_out = result.work_dir / "data" / "held-out.jsonl";
  write_file_atomic(prompts, grpo_demo_prompts(kTrainPrompts, 0), /*overwrite=*/false);
  write_file_atomic(held_out, grpo_demo_prompts(kHeldOutPrompts, kHeldOutFirst), /*overwrite=*/false);
  line(out, fmt::format("[1/3] wrote {} training prompts {} and {} held-out ones {} (\"{}\", each with its "
                        "\"answer\")",
                        kTrainPrompts, prompts.string(), kHeldOutPrompts, held_out.string(), question(0)));

  // 2. A tiny random model with the bundled tokenizer.
  const Qwen3Config config = demo_model_config();
  const fs::path model = result.work_dir / "base-model";
  SynthOptions synth;
  synth.seed = options.seed;
  synth.dtype = DType::F32;
  const SynthReport synthesised = synth_model(config, model, synth);
  NVFP4LM_CHECK(synthesised.tokenizer_from.has_value(),
                "the bundled Qwen3 tokenizer (models/qwen3-tokenizer) was not found beside the executable or in the "
                "source tree; the demo needs it");
  line(out, fmt::format("[2/3] synthesised a random Qwen3 ({} layers, hidden {}, vocab {}: {:.1f}M parameters) in {}",
                        config.num_hidden_layers, config.hidden_size, config.vocab_size, synthesised.parameters / 1e6,
                        model.string()));

  // 3. GRPO.
  TrainOptions train;
  train.model = model.string();
  train.data = prompts.string();
  train.eval_data = held_out.string();
  train.output = (result.work_dir / "run").string();
  train.objective = TrainObjective::Grpo;
  train.reward = kReward;
  train.num_generations = kGenerations;
  train.max_completion_tokens = kCompletionTokens;
  train.batch = kPromptsPerStep;
  train.lr = kLr;
  train.lr_schedule = LrDecay::Constant;
  train.warmup = kWarmup;
  train.max_steps = options.steps > 0 ? options.steps : kSteps;
  train.seed = options.seed;
  train.device = "cpu";
  result.command = fmt::format(
      "nvfp4lm train --objective grpo --model {} --data {} --eval-data {} --output {} --reward {} "
      "--num-generations {} --max-completion-tokens {} --batch {} --lr {} --lr-schedule constant --warmup {} "
      "--max-steps {} --seed {} --device cpu",
      quoted(model.string()), quoted(prompts.string()), quoted(held_out.string()),
      quoted((result.work_dir / "run-again").string()), quoted(kReward), kGenerations, kCompletionTokens,
      kPromptsPerStep, kLr, kWarmup, train.max_steps, options.seed);

  std::optional<Trainer> trainer;
  {
    const QuietInfoLogs quiet;  // the loaders' info lines repeat what the set-up lines below say
    trainer.emplace(train, std::set<std::string>{});
  }
  // The train command's rollouts, keeping the first held-out prompt's completions of each evaluation to show them.
  std::vector<std::string>* keep = nullptr;
  RolloutFn rollouts = batch_engine_rollouts(trainer->tokenizer(), grpo_rollout_settings(train));
  trainer->set_rollouts([&keep, rollouts](Qwen3Trainable& policy, const std::vector<std::vector<int32_t>>& batch,
                                          const std::vector<uint64_t>& seeds) {
    std::vector<Completion> completions = rollouts(policy, batch, seeds);
    if (keep != nullptr)
      for (size_t i = 0; i < completions.size() && i < static_cast<size_t>(kGenerations); ++i)
        keep->push_back(completions[i].text);
    return completions;
  });
  line(out, fmt::format("[3/3] GRPO: device cpu, compute path {}, precision {}; reward {} (the answer begins with a "
                        "capital letter); {} completions of {} prompts a step, at most {} tokens each, temperature 1",
                        trainer->compute_path(), trainer->precision(), kReward, kGenerations, kPromptsPerStep,
                        kCompletionTokens));
  for (const std::string& setup : trainer->setup_lines()) line(out, "      " + setup);
  const auto evaluate = [&](std::vector<std::string>& samples) {
    keep = &samples;
    const EvalMetrics eval = trainer->evaluate();
    keep = nullptr;
    return eval.grpo->reward;
  };
  result.reward_before = evaluate(result.samples_before);
  line(out, fmt::format("      held-out prompts before training: mean reward {:.3f}; \"{}\" was answered {}",
                        result.reward_before, question(kHeldOutFirst), samples_line(result.samples_before)));
  std::optional<ProgressDisplay> display;
  if (out) display.emplace(Device::cpu(), options.interactive, out);
  Trainer::Progress progress;
  progress.on_step = [&](const StepMetrics& metrics) {
    result.step_rewards.push_back(metrics.grpo->reward);
    if (display) display->update(metrics);
  };
  progress.before_output = [&] {
    if (display) display->finish();
  };
  trainer->run(progress);
  result.reward_after = evaluate(result.samples_after);
  line(out,
       fmt::format("      held-out prompts after {} steps: mean reward {:.3f}; \"{}\" was answered {}", train.max_steps,
                   result.reward_after, question(kHeldOutFirst), samples_line(result.samples_after)));
  const auto distinct = std::set<std::string>(result.samples_after.begin(), result.samples_after.end()).size();
  if (result.passed() && distinct < result.samples_after.size())
    line(out, fmt::format("      {} different answers of {}: the policy found the cheapest text that meets the rule. A "
                          "verifiable reward gets exactly what it checks; real runs check the answer itself "
                          "(`--reward exact` against each prompt's \"answer\")",
                          distinct, result.samples_after.size()));
  result.seconds = seconds_since(start);
  line(out, fmt::format("demo --grpo {} in {:.1f} s ({}): the held-out reward went from {:.3f} to {:.3f} (passes "
                        "from under 0.2 to over 0.9)",
                        result.passed() ? "passed" : "FAILED", result.seconds, format_duration(result.seconds),
                        result.reward_before, result.reward_after));
  line(out, "the same training with the train command:\n  " + result.command);
  return result;
}

}  // namespace nvfp4lm
