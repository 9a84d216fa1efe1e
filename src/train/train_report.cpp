// What `nvfp4lm train` prints about a run (trainer.h): the compute path and precision of its header, the set-up
// lines before the first step and the summary after the last.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/memory.h"
#include "core/memory_guard.h"
#include "train/train_step.h"
#include "train/trainer.h"

namespace nvfp4lm {
namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

}  // namespace

std::string Trainer::compute_path() const { return train_compute_path(device_, options_.qat); }

std::string Trainer::precision() const { return train_precision(device_, options_.bf16_master); }

std::vector<std::string> Trainer::setup_lines() const {
  std::vector<std::string> lines;
  const Qwen3Config& config = model_->config();
  lines.push_back(fmt::format(
      "model {} ({}, {} layers{}, hidden {}, vocab {}, {:.1f}M parameters)", files_->path().string(),
      options_.synthetic ? "random, in memory (--synthetic)" : std::string(model_format_name(files_->format())),
      config.num_hidden_layers, options_.max_layers > 0 ? " (the first ones only: --max-layers)" : "",
      config.hidden_size, config.vocab_size, config.total_parameters() / 1e6));
  lines.push_back("training " + model_->describe());
  for (const std::string& line : split_lines(describe_dataset_summary(data_.summary))) lines.push_back(line);
  if (options_.has_eval()) {
    lines.push_back(fmt::format(
        "evaluation: {} ({} scored tokens) {}, {}{}",
        options_.objective == TrainObjective::Dpo    ? fmt::format("{} pairs", data_.eval.samples / 2)
        : options_.objective == TrainObjective::Grpo ? fmt::format("{} prompts", data_.eval.samples)
                                                     : fmt::format("{} samples", data_.eval.samples),
        data_.eval.tokens,
        options_.eval_data.empty()
            ? fmt::format("held out of the training data (--eval-split {:g})", options_.eval_split)
            : "from " + options_.eval_data,
        options_.eval_every > 0 ? fmt::format("every {} steps and at the end", options_.eval_every)
                                : std::string("at the end"),
        options_.save_best ? "; the checkpoint with the lowest evaluation loss is kept (--save-best)" : ""));
  }
  if (memory_guard_) lines.push_back(memory_guard_->description());
  if (options_.calibrate_steps > 0)
    lines.push_back(
        fmt::format("activation calibration: input ranges recorded during the last {} steps, written as "
                    "the ModelOpt export's input_scale",
                    std::min(options_.calibrate_steps, plan_.total_steps)));
  lines.push_back(fmt::format("chat template: {}; data template {}{}{}", tokenizer_->chat_template.origin(),
                              pair_template_name(options_.data_template),
                              options_.train_on_everything ? ", training on every token" : "",
                              options_.train_reasoning ? "" : ", reasoning not trained"));
  int64_t trained = 0;
  for (const Parameter& p : model_->parameters()) trained += p.value.numel();
  lines.push_back(fmt::format("parameters trained: {} ({:.2f}M) in {} tensors, of {:.2f}M", trained, trained / 1e6,
                              model_->parameters().size(), config.total_parameters() / 1e6));
  lines.push_back(
      fmt::format("optimizer {} (weight decay {}, betas 0.9/0.95), state {:.1f} MiB{}; lr {:g} {} "
                  "(warmup {}, min ratio {:g}), max grad norm {:g}",
                  options_.optimizer, options_.weight_decay, to_mib(optimizer_->state_bytes()),
                  comm_->size() > 1 ? " on this rank" : "", options_.lr, lr_decay_name(options_.lr_schedule),
                  options_.warmup, options_.min_lr_ratio, options_.max_grad_norm));
  if (options_.objective == TrainObjective::Grpo) {
    lines.push_back(fmt::format("{}; batch {} prompts x {} completions (--num-generations), seed {}", plan_.describe(),
                                options_.batch, options_.num_generations, options_.seed));
    lines.push_back(fmt::format(
        "objective grpo: reward {}; completions sampled from the training forward's weights by the batch decode "
        "engine at temperature {:g} (top-k, top-p off), at most {} tokens; advantages normalized in each prompt's "
        "group; clipped loss, r in [{:g}, {:g}], the mean over the step's completion tokens (TRL's dapo)",
        options_.reward, options_.temperature, options_.max_completion_tokens, 1 - options_.epsilon,
        1 + (options_.epsilon_high > 0 ? options_.epsilon_high : options_.epsilon)));
    if (grpo_reference_)
      lines.push_back(fmt::format(
          "KL term: beta {:g} x k3(policy, reference) a completion token; reference: the starting model, {}",
          options_.grpo_beta(),
          options_.lora_rank > 0 ? "the base without adapters (no copy)"
                                 : fmt::format("a frozen copy of its forward weights ({:.1f} MiB)",
                                               to_mib(grpo_reference_->weights().nbytes()))));
    if (options_.lora_rank > 0)
      lines.push_back("rollouts: the frozen base with the adapters' current values applied at run time");
  } else if (options_.objective == TrainObjective::Dpo) {
    lines.push_back(
        fmt::format("{}; batch {} pairs (2 x {} rows, each completion padded to the batch's longest, at "
                    "most {} tokens), seed {}",
                    plan_.describe(), options_.batch, options_.batch, options_.seq_len, options_.seed));
    lines.push_back(fmt::format(
        "objective dpo: {} loss, beta {:g}, the mean over pairs; reference: the starting model ({}), its "
        "log-probabilities of every completion computed once before the first step ({:.1f} s)",
        preference_loss_name(options_.dpo_loss), options_.dpo_beta(),
        options_.lora_rank > 0 ? "the base without adapters" : "the weights as loaded, frozen", reference_seconds_));
  } else {
    lines.push_back(fmt::format("{}; batch {} rows x {} tokens ({}), loss {}, seed {}", plan_.describe(),
                                options_.batch, options_.seq_len, options_.packing ? "packed" : "one sample a row",
                                teacher_ ? "distillation" : loss_kind_name(options_.loss), options_.seed));
  }
  if (teacher_) {
    const std::string terms = fmt::format(
        "loss = {:g} x temperature^2 x KL(teacher || student) at temperature {:g}{}", options_.distill_weight,
        options_.distill_temperature,
        options_.distill_weight < 1 ? fmt::format(" + {:g} x cross-entropy", 1 - options_.distill_weight) : "");
    if (teacher_->cache) {
      const DistillCacheInfo& cache = teacher_->cache->info();
      lines.push_back(fmt::format(
          "distillation (QAD) from the teacher cache {} (teacher {}, top {} tokens + the rest of the vocabulary at "
          "each of {} positions): {}, over the K + 1 outcomes (a lower bound of the full KL)",
          options_.distill_from, cache.teacher, cache.top_k, cache.positions, terms));
    } else {
      lines.push_back(fmt::format(
          "distillation (QAD) from {} ({}): {}; the teacher's forward runs on each batch ({:.2f}M parameters, frozen)",
          options_.distill_from, teacher_->model->describe(), terms,
          teacher_->files->config().total_parameters() / 1e6));
    }
  }
  if (comm_->size() > 1)
    lines.push_back(fmt::format(
        "data parallel: {}; micro-batch i of a step is rank i mod {}'s ({} a rank a step), {}; optimizer state "
        "sharded (ZeRO-1): {}; rank 0 writes the outputs",
        comm_->describe(), comm_->size(), options_.grad_accum / comm_->size(), data_parallel_->describe_exchange(),
        data_parallel_->describe_shard()));
  if (resumed_from_)
    lines.push_back(fmt::format("resuming {} at step {} of {}", resume_->checkpoint.dir.string(), *resumed_from_,
                                plan_.total_steps));
  lines.push_back(
      fmt::format("run directory {} (checkpoints {}, keeping {}; metrics {})", options_.output,
                  options_.save_every > 0 ? fmt::format("every {} steps and at the end", options_.save_every)
                                          : std::string("at the end"),
                  options_.keep, run_dir_ ? run_dir_->metrics().path().string() : std::string("written by rank 0")));
  return lines;
}

std::vector<std::string> format_train_summary(const TrainSummary& s) {
  std::vector<std::string> lines;
  const double tokens_per_second = s.seconds > 0 ? static_cast<double>(s.input_tokens) / s.seconds : 0;
  lines.push_back(
      fmt::format("done: {} of {} steps{} in {} ({:.1f} s), {} tokens ({} trained), {:.0f} tok/s{}", s.steps,
                  s.total_steps, s.start_step > 0 ? fmt::format(" (resumed at step {})", s.start_step) : "",
                  format_duration(s.seconds), s.seconds, s.input_tokens, s.loss_tokens, tokens_per_second,
                  s.skipped_steps > 0 ? fmt::format(", {} steps skipped (non-finite)", s.skipped_steps) : ""));
  lines.push_back(fmt::format("loss: final {:.4f}, best {:.4f} at step {}", s.final_loss, s.best_loss, s.best_step));
  if (s.best_eval_step > 0)
    lines.push_back(
        fmt::format("evaluation loss: best {:.4f}{} at step {}{}", s.best_eval_loss,
                    s.objective_loss ? std::string() : fmt::format(" (perplexity {:.2f})", std::exp(s.best_eval_loss)),
                    s.best_eval_step,
                    s.best_checkpoint ? fmt::format(", kept in {} (--save-best; export it with `nvfp4lm "
                                                    "export {} OUT`)",
                                                    s.best_checkpoint->string(), s.best_checkpoint->string())
                                      : std::string()));
  for (const fs::path& checkpoint : s.checkpoints) lines.push_back("checkpoint: " + checkpoint.string());
  if (s.export_report) lines.push_back(describe_export(*s.export_report));
  lines.push_back("metrics: " + s.metrics_path.string());
  lines.push_back(s.memory_text);
  if (s.memory_report_path) lines.push_back("memory report: " + s.memory_report_path->string());
  return lines;
}

}  // namespace nvfp4lm
