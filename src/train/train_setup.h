// The set-up of a training run, one function per thing it needs, in the order Trainer calls them: the model's
// files, the tokenizer and chat template, the training and evaluation data, the step plan and LR schedule, the
// trainable model and its optimizer. Each checks its own flags against what it loaded (a --seq-len longer than the
// model's context, a tokenizer larger than the model's vocabulary, --train-last-layers above the model's layers)
// and says which flag to change.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "data/data_loader.h"
#include "data/dataset.h"
#include "io/model_files.h"
#include "model/qwen3_trainable.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "train/distill_cache.h"
#include "train/optim/lr_schedule.h"
#include "train/optim/optimizer.h"
#include "train/run_directory.h"
#include "train/step_plan.h"
#include "train/train_options.h"

namespace nvfp4lm {

// --model (its first --max-layers blocks), or the --synthetic random model.
std::unique_ptr<ModelFiles> open_training_model(const TrainOptions& options);

struct TrainTokenizer {
  Tokenizer tokenizer;
  fs::path dir;  // where it came from (its files travel with exports)
  ChatTemplate chat_template;
};
// --tokenizer, or the model's, or for --synthetic the bundled Qwen3 tokenizer; with --chat-template resolved.
TrainTokenizer load_training_tokenizer(const TrainOptions& options, const ModelFiles& files);

// The evaluation batches: rendered, cut and batched like training batches, in file order (no shuffling).
struct EvalSet {
  std::vector<TrainBatch> batches;
  int64_t samples = 0;
  int64_t tokens = 0;  // scored tokens
};

struct TrainData {
  DatasetSummary summary;
  std::unique_ptr<DataLoader> loader;
  EvalSet eval;  // empty without --eval-data / --eval-split
  // --objective dpo: reference_logps of every training sample (by sample index); the evaluation batches carry theirs.
  std::vector<double> reference_logps;
  // --objective grpo: each training prompt's record (by sample index); the evaluation prompts and theirs.
  std::vector<nlohmann::json> prompt_records;
  std::vector<Sample> eval_prompts;
  std::vector<nlohmann::json> eval_prompt_records;
};
// --data (or, for --synthetic without it, the built-in whoami set), the --eval-split samples held out of it, and
// --eval-data.
TrainData load_training_data(const TrainOptions& options, const TrainTokenizer& tokenizer, const Qwen3Config& config);

// The run's steps (step_plan.h), with a warning when a micro-batch is mostly padding or --grad-accum exceeds the
// run; Error when --warmup is longer than the run.
StepPlan plan_training_steps(const TrainOptions& options, const DataLoader& loader, const DatasetSummary& summary);
LrSchedule training_schedule(const TrainOptions& options, int64_t total_steps);

Qwen3Trainable build_trainable_model(const TrainOptions& options, const ModelFiles& files, Device device);

// --distill-from: the teacher, frozen (QAT off, nothing trained, BF16 weights on CUDA as it computes) on the training
// device. Error unless it has the student's vocabulary and, when a tokenizer.json is beside it, the same tokens.
// Or a teacher cache (`nvfp4lm distill-cache`, train/distill_cache.h), whose vocabulary and temperature must be the
// run's; its entries are attached to every batch (attach_teacher_top_k).
struct DistillationTeacher {
  std::unique_ptr<ModelFiles> files;    // a model
  std::optional<Qwen3Trainable> model;  // a model
  std::optional<DistillCache> cache;    // a cache
};
std::optional<DistillationTeacher> load_distillation_teacher(const TrainOptions& options, const ModelFiles& student,
                                                             const Tokenizer& tokenizer, Device device);
// With a cached teacher, the batch's teacher top K from the cache; nothing otherwise.
void attach_teacher_top_k(const DistillationTeacher* teacher, TrainBatch& batch);
// The micro-batches of step `step` (0-based) from the loader, which must stand where the previous step left it:
// --steps-per-epoch starts the step's epoch (leaving the rest of a capped one), and a step ends with its epoch.
std::vector<TokenBatch> step_batches(const StepPlan& plan, DataLoader& loader, int64_t step);
// Every batch of steps [from_step, plan.total_steps), the loader's position left as it was: what the rest of a run
// trains on (`distill-cache` caches the teacher for exactly these).
void for_each_run_batch(const StepPlan& plan, DataLoader& loader, int64_t from_step,
                        const std::function<void(const TokenBatch&)>& visit);
// With a cached teacher: every sample the rest of the run takes has its entries in the cache (Error naming the fix
// otherwise), before the first step rather than at the step that meets a missing one.
void check_teacher_cache_covers(const DistillationTeacher* teacher, const StepPlan& plan, DataLoader& loader,
                                int64_t from_step);
// The loss of every step and evaluation: --loss, or distillation against `teacher` with --distill-weight and
// --distill-temperature.
TrainLoss training_loss(const TrainOptions& options, DistillationTeacher* teacher);
// --objective dpo: the reference log-probability of every sample of `loader` (a completion's summed log-probability
// of its scored tokens, by sample index), from `model` as it is (the run's frozen starting point), in batches of the
// loader's rows in sample order.
std::vector<double> reference_logps(Qwen3Trainable& model, const DataLoader& loader);
// Over `parameters`: the model's, or a data-parallel rank's shard of them (DataParallel::owned).
std::unique_ptr<Optimizer> make_training_optimizer(const TrainOptions& options, std::span<const Parameter> parameters);

// config.json and generation_config.json (the file beside the model, else the defaults of its config) and the
// tokenizer: what the run's copy of the model's files and its exports carry.
SourceModelFiles source_model_files(const TrainOptions& options, const ModelFiles& files,
                                    const TrainTokenizer& tokenizer);

}  // namespace nvfp4lm
