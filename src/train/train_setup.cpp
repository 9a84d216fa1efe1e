// See train_setup.h.
#include "train/train_setup.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "core/json_text.h"
#include "core/logging.h"
#include "data/eval_split.h"
#include "data/preference_data.h"
#include "data/prompt_data.h"
#include "data/whoami_data.h"
#include "io/hf_config.h"
#include "io/synth_model.h"

namespace nvfp4lm {
namespace {

// --synthetic: the tiny preset's shape with --in-features / --out-features as hidden and intermediate sizes.
Qwen3Config synthetic_config(const TrainOptions& options) {
  Qwen3Config config = qwen3_preset("tiny");
  if (options.in_features > 0) config.hidden_size = options.in_features;
  if (options.out_features > 0) config.intermediate_size = options.out_features;
  return config;
}

DataLoaderOptions loader_options(const TrainOptions& options, int32_t pad_id, bool shuffle) {
  DataLoaderOptions loader;
  loader.batch_size = options.batch;
  loader.seq_len = options.seq_len;
  loader.packing = options.packing;
  if (options.objective == TrainObjective::Grpo) loader.packing = false;  // --batch prompts, one a row
  if (options.objective == TrainObjective::Dpo) {  // --batch pairs, each completion a row of its own
    loader.batch_size = 2 * options.batch;
    loader.packing = false;
    loader.group = 2;
  }
  loader.shuffle = shuffle;
  loader.seed = options.seed;
  loader.pad_id = pad_id;
  return loader;
}

EvalSet load_eval_set(const TrainOptions& options, std::vector<Sample> held_out, const DatasetOptions& data_options,
                      const Tokenizer& tokenizer) {
  EvalSet eval;
  if (!options.has_eval()) return eval;
  std::vector<Sample> samples = std::move(held_out);
  if (!options.eval_data.empty()) {
    DatasetOptions eval_options = data_options;
    eval_options.goal = "evaluate";
    samples = options.objective == TrainObjective::Dpo
                  ? read_preference_data(options.eval_data, tokenizer, eval_options).samples
                  : read_dataset(options.eval_data, tokenizer, eval_options).samples;
  }
  eval.samples = static_cast<int64_t>(samples.size());
  DataLoader loader(std::move(samples), loader_options(options, default_pad_id(tokenizer), /*shuffle=*/false));
  const int64_t batches = loader.batches_in_epoch(0);
  for (int64_t i = 0; i < batches; ++i) {
    const TokenBatch batch = loader.next_batch();
    eval.tokens += batch.tokens_in_batch;
    eval.batches.push_back({batch.ids, batch.targets, batch.positions, batch.segment_ids, {}});
  }
  return eval;
}

}  // namespace

std::unique_ptr<ModelFiles> open_training_model(const TrainOptions& options) {
  std::unique_ptr<ModelFiles> files;
  if (options.synthetic) {
    const Qwen3Config shape = synthetic_config(options);
    const std::string name = fmt::format("synthetic:hidden={},intermediate={},layers={},seed={}", shape.hidden_size,
                                         shape.intermediate_size, shape.num_hidden_layers, options.seed);
    files = random_model_files(shape, name, options.seed);
  } else {
    OpenModelOptions open_options;
    if (!options.tokenizer.empty()) open_options.tokenizer_dir = options.tokenizer;
    files = open_model(options.model, open_options);
  }
  const int layers = files->config().num_hidden_layers;
  if (options.max_layers > 0) {
    if (options.max_layers > layers)
      throw UsageError(fmt::format("--max-layers {} is more than the {} layers of {}; use 1..{}", options.max_layers,
                                   layers, files->path().string(), layers));
    files->keep_first_layers(options.max_layers);
  }
  return files;
}

TrainTokenizer load_training_tokenizer(const TrainOptions& options, const ModelFiles& files) {
  std::optional<fs::path> dir = !options.tokenizer.empty() ? fs::path(options.tokenizer) : files.tokenizer_dir();
  if (!dir && options.synthetic) dir = find_bundled_tokenizer();
  NVFP4LM_CHECK(dir.has_value(), "{} has no tokenizer.json beside it; name a tokenizer directory with --tokenizer",
                options.synthetic ? std::string("the --synthetic model (the bundled Qwen3 tokenizer was not found)")
                                  : "the model " + options.model);
  Tokenizer tokenizer = Tokenizer::load(*dir);
  check_tokenizer_fits_model(tokenizer, files.config().vocab_size, files.path().string());
  ChatTemplate chat_template = ChatTemplate::resolve(tokenizer, options.chat_template);
  return {std::move(tokenizer), *dir, std::move(chat_template)};
}

TrainData load_training_data(const TrainOptions& options, const TrainTokenizer& tokenizer, const Qwen3Config& config) {
  // Rows longer than the model's context could not be trained (RoPE tables, attention) and only waste memory.
  NVFP4LM_CHECK(options.seq_len <= config.max_position_embeddings,
                "--seq-len {} is longer than the model's context (max_position_embeddings {}); use at most that",
                options.seq_len, config.max_position_embeddings);
  DatasetOptions data_options;
  data_options.format = options.data_format;
  data_options.pair_template = options.data_template;
  data_options.chat_template = tokenizer.chat_template;
  data_options.train_reasoning = options.train_reasoning;
  data_options.train_on_everything = options.train_on_everything;
  data_options.strict = options.strict;
  data_options.max_tokens = options.seq_len;
  // --synthetic without --data: the identity data set of `nvfp4lm data whoami` (the defaults), made in memory.
  Dataset dataset;
  TrainData data;
  if (options.objective == TrainObjective::Grpo) {
    NVFP4LM_CHECK(!options.data.empty(),
                  "--objective grpo samples answers to prompts: name them with --data FILE.jsonl");
    PromptData prompts = read_prompt_data(options.data, tokenizer.tokenizer, data_options);
    const RewardSpec reward = parse_reward_spec(options.reward);
    check_prompts_for_reward(reward, prompts.records, prompts.samples, options.data);
    if (options.eval_split > 0) {  // the held-out prompts and their records, every 1/F-th
      std::vector<Sample> kept;
      std::vector<nlohmann::json> kept_records;
      for (size_t i = 0; i < prompts.samples.size(); ++i) {
        const bool hold = held_out_at(i, options.eval_split);
        (hold ? data.eval_prompts : kept).push_back(std::move(prompts.samples[i]));
        (hold ? data.eval_prompt_records : kept_records).push_back(std::move(prompts.records[i]));
      }
      NVFP4LM_CHECK(!data.eval_prompts.empty() && !kept.empty(),
                    "--eval-split {} of {} prompts holds out {} and keeps {}; choose a fraction that leaves both",
                    options.eval_split, prompts.samples.size(), data.eval_prompts.size(), kept.size());
      prompts.samples = std::move(kept);
      prompts.records = std::move(kept_records);
    }
    if (!options.eval_data.empty()) {
      DatasetOptions eval_options = data_options;
      eval_options.goal = "evaluate";
      PromptData eval = read_prompt_data(options.eval_data, tokenizer.tokenizer, eval_options);
      check_prompts_for_reward(reward, eval.records, eval.samples, options.eval_data);
      data.eval_prompts = std::move(eval.samples);
      data.eval_prompt_records = std::move(eval.records);
    }
    data.summary = prompts.summary;
    data.prompt_records = std::move(prompts.records);
    data.eval.samples = static_cast<int64_t>(data.eval_prompts.size());
    data.loader = std::make_unique<DataLoader>(
        std::move(prompts.samples), loader_options(options, default_pad_id(tokenizer.tokenizer), /*shuffle=*/true));
    return data;
  }
  if (options.objective == TrainObjective::Dpo) {
    NVFP4LM_CHECK(!options.data.empty(),
                  "--objective dpo trains on preference pairs: name them with --data FILE.jsonl");
    PreferenceData pairs = read_preference_data(options.data, tokenizer.tokenizer, data_options);
    dataset.samples = std::move(pairs.samples);
    dataset.summary = pairs.summary;
  } else {
    dataset = options.data.empty()
                  ? parse_dataset(make_whoami_dataset(WhoamiOptions{}).jsonl, "the built-in whoami data set",
                                  DataFormat::Jsonl, tokenizer.tokenizer, data_options)
                  : read_dataset(options.data, tokenizer.tokenizer, data_options);
  }
  data.summary = dataset.summary;
  std::vector<Sample> held_out;
  if (options.eval_split > 0)
    held_out = hold_out_samples(dataset.samples, options.eval_split, options.objective == TrainObjective::Dpo ? 2 : 1);
  data.eval = load_eval_set(options, std::move(held_out), data_options, tokenizer.tokenizer);
  data.loader = std::make_unique<DataLoader>(
      std::move(dataset.samples), loader_options(options, default_pad_id(tokenizer.tokenizer), /*shuffle=*/true));
  return data;
}

StepPlan plan_training_steps(const TrainOptions& options, const DataLoader& loader, const DatasetSummary& summary) {
  const StepPlan plan = plan_steps({options.max_steps, options.epochs, options.steps_per_epoch, options.grad_accum},
                                   [&](int64_t epoch) { return loader.batches_in_epoch(epoch); });
  // A batch far larger than the data trains mostly padding, slowly: say so instead of running "forever". (GRPO's rows
  // are a prompt and its completion, as long as they are: no padding to --seq-len.)
  const int64_t batch_tokens = options.batch * options.seq_len;
  if (options.objective != TrainObjective::Grpo && summary.tokens > 0 && batch_tokens > 4 * summary.tokens) {
    log::warn(
        "one micro-batch holds {} tokens (--batch {} x --seq-len {}) but the whole data set has {}: over {:.0f}% "
        "of every step is padding; lower --seq-len or --batch",
        batch_tokens, options.batch, options.seq_len, summary.tokens,
        100.0 * (1.0 - static_cast<double>(summary.tokens) / static_cast<double>(batch_tokens)));
  }
  if (options.max_steps == 0 && options.grad_accum > plan.total_batches) {
    log::warn("--grad-accum {} is more than the {} micro-batches of the whole run: it makes a single optimizer step",
              options.grad_accum, plan.total_batches);
  }
  NVFP4LM_CHECK(options.warmup <= plan.total_steps, "--warmup {} is longer than the run ({} optimizer steps)",
                options.warmup, plan.total_steps);
  return plan;
}

LrSchedule training_schedule(const TrainOptions& options, int64_t total_steps) {
  LrSchedule schedule;
  schedule.decay = options.lr_schedule;
  schedule.peak_lr = options.lr;
  schedule.warmup_steps = options.warmup;
  schedule.total_steps = total_steps;
  schedule.min_lr_ratio = options.min_lr_ratio;
  check_lr_schedule(schedule);
  return schedule;
}

Qwen3Trainable build_trainable_model(const TrainOptions& options, const ModelFiles& files, Device device) {
  const int layers = files.config().num_hidden_layers;
  if (options.train_last_layers > layers)
    throw UsageError(
        fmt::format("--train-last-layers {} is more than the {} layers of the model: use 1..{}, or 0 to "
                    "train every parameter",
                    options.train_last_layers, layers, layers));
  TrainModelOptions model_options;
  model_options.qat = options.qat;
  model_options.block = options.block;
  model_options.quantize_lm_head = options.quantize_lm_head;
  // N <= 0 trains everything, as in the F# predecessor (where 0 was the default).
  model_options.train_last_layers = options.train_last_layers > 0 ? options.train_last_layers : -1;
  model_options.device = device;
  model_options.bf16_master = options.bf16_master;
  model_options.recompute = options.recompute;
  model_options.fused_update = options.fused_update;
  model_options.packed_weights = options.packed_weights;
  model_options.lora = train_lora_options(options);
  return Qwen3Trainable::from_files(files, model_options);
}

std::optional<DistillationTeacher> load_distillation_teacher(const TrainOptions& options, const ModelFiles& student,
                                                             const Tokenizer& tokenizer, Device device) {
  if (options.distill_from.empty()) return std::nullopt;
  if (is_distill_cache(options.distill_from)) {
    DistillationTeacher teacher;
    teacher.cache.emplace(DistillCache::open(options.distill_from));
    const DistillCacheInfo& info = teacher.cache->info();
    NVFP4LM_CHECK(info.vocab == student.config().vocab_size,
                  "--distill-from {}: the cache's teacher ({}) has {} tokens, the student ({}) {}: distillation "
                  "compares token distributions over one vocabulary",
                  options.distill_from, info.teacher, info.vocab, student.path().string(), student.config().vocab_size);
    NVFP4LM_CHECK(static_cast<float>(info.temperature) == static_cast<float>(options.distill_temperature),
                  "--distill-from {}: the cache holds the teacher's distribution at temperature {:g}, the run asks "
                  "for {:g}: pass --distill-temperature {:g}, or make a cache at {:g} (distill-cache "
                  "--distill-temperature)",
                  options.distill_from, info.temperature, options.distill_temperature, info.temperature,
                  options.distill_temperature);
    return teacher;
  }
  std::unique_ptr<ModelFiles> files = open_model(options.distill_from, OpenModelOptions{});
  const std::string where = "--distill-from " + options.distill_from;
  NVFP4LM_CHECK(files->config().vocab_size == student.config().vocab_size,
                "{}: the teacher's vocabulary has {} tokens, the student's ({}) {}: distillation compares token "
                "distributions over one vocabulary; use a teacher of the student's model family",
                where, files->config().vocab_size, student.path().string(), student.config().vocab_size);
  if (const std::optional<fs::path> dir = files->tokenizer_dir()) {
    const Tokenizer teacher_tokenizer = Tokenizer::load(*dir);
    bool same = teacher_tokenizer.vocab_size() == tokenizer.vocab_size();
    for (size_t id = 0; same && id < tokenizer.vocab_size(); ++id) {
      const auto token = static_cast<int32_t>(id);
      same = !tokenizer.is_used(token) ||
             (teacher_tokenizer.is_used(token) && teacher_tokenizer.token_bytes(token) == tokenizer.token_bytes(token));
    }
    NVFP4LM_CHECK(same,
                  "{}: the teacher's tokenizer ({}) gives other tokens than the student's: distillation compares "
                  "the two models token by token, so both must use one tokenizer",
                  where, (*dir / "tokenizer.json").string());
  }
  TrainModelOptions model_options;
  model_options.qat = QatMode::Off;
  model_options.train_last_layers = 0;
  model_options.device = device;
  model_options.bf16_master = !device.is_cpu();
  DistillationTeacher teacher;
  teacher.model.emplace(Qwen3Trainable::from_files(*files, model_options));
  teacher.files = std::move(files);
  return teacher;
}

void attach_teacher_top_k(const DistillationTeacher* teacher, TrainBatch& batch) {
  if (teacher != nullptr && teacher->cache) teacher->cache->attach(batch);
}

std::vector<TokenBatch> step_batches(const StepPlan& plan, DataLoader& loader, int64_t step) {
  std::vector<TokenBatch> batches;
  const std::optional<int64_t> epoch = plan.epoch_of(step);
  if (epoch) loader.start_epoch(*epoch);
  const int64_t count = plan.micro_batches(step);
  while (static_cast<int64_t>(batches.size()) < count) {
    batches.push_back(loader.next_batch());
    if (epoch && batches.back().ends_epoch) break;
  }
  return batches;
}

void for_each_run_batch(const StepPlan& plan, DataLoader& loader, int64_t from_step,
                        const std::function<void(const TokenBatch&)>& visit) {
  const nlohmann::json position = loader.state();
  for (int64_t step = from_step; step < plan.total_steps; ++step)
    for (const TokenBatch& batch : step_batches(plan, loader, step)) visit(batch);
  loader.restore(position);
}

void check_teacher_cache_covers(const DistillationTeacher* teacher, const StepPlan& plan, DataLoader& loader,
                                int64_t from_step) {
  if (teacher == nullptr || !teacher->cache) return;
  for_each_run_batch(plan, loader, from_step, [&](const TokenBatch& batch) {
    teacher->cache->check_covers({batch.ids, batch.targets, batch.positions, batch.segment_ids, {}});
  });
}

TrainLoss training_loss(const TrainOptions& options, DistillationTeacher* teacher) {
  TrainLoss loss(options.loss);
  if (options.objective == TrainObjective::Dpo)
    loss.preference = PreferenceSettings{options.dpo_loss, options.dpo_beta()};
  if (options.objective == TrainObjective::Grpo)
    loss.policy_gradient = PolicyGradientSettings{
        options.epsilon, options.epsilon_high > 0 ? options.epsilon_high : options.epsilon, options.grpo_beta()};
  if (teacher != nullptr) {
    if (teacher->model) loss.teacher = &*teacher->model;
    loss.cached_teacher = teacher->cache.has_value();
    loss.distillation.weight = static_cast<float>(options.distill_weight);
    loss.distillation.temperature = static_cast<float>(options.distill_temperature);
  }
  return loss;
}

std::vector<double> reference_logps(Qwen3Trainable& model, const DataLoader& loader) {
  const std::vector<Sample>& samples = loader.samples();
  const auto rows = static_cast<size_t>(loader.options().batch_size);
  std::vector<double> logps(samples.size());
  for (size_t begin = 0; begin < samples.size(); begin += rows) {
    std::vector<std::vector<int64_t>> batch_rows;
    int64_t row_tokens = 0;
    for (size_t i = begin; i < std::min(begin + rows, samples.size()); ++i) {
      batch_rows.push_back({static_cast<int64_t>(i)});
      row_tokens = std::max<int64_t>(row_tokens, static_cast<int64_t>(samples[i].ids.size()));
    }
    const TokenBatch batch = assemble_batch(samples, batch_rows, row_tokens, loader.options().pad_id);
    const std::vector<double> batch_logps =
        model.completion_logps({batch.ids, batch.targets, batch.positions, batch.segment_ids, {}});
    std::copy(batch_logps.begin(), batch_logps.end(), logps.begin() + static_cast<std::ptrdiff_t>(begin));
  }
  return logps;
}

std::unique_ptr<Optimizer> make_training_optimizer(const TrainOptions& options, std::span<const Parameter> parameters) {
  AdamWOptions adamw;
  adamw.weight_decay = options.weight_decay;
  adamw.seed = options.seed;
  check_adamw_options(adamw);
  std::unique_ptr<Optimizer> optimizer = make_optimizer(options.optimizer, parameters, adamw);
  optimizer->set_chunk_rows(options.step_chunk_rows);
  return optimizer;
}

SourceModelFiles source_model_files(const TrainOptions& options, const ModelFiles& files,
                                    const TrainTokenizer& tokenizer) {
  SourceModelFiles source;
  source.config = files.config_json();
  const fs::path generation = files.directory() / "generation_config.json";
  std::error_code ec;
  source.generation_config = !files.directory().empty() && fs::is_regular_file(generation, ec)
                                 ? read_json_file(generation)
                                 : generation_config_to_json(files.config());
  source.tokenizer_dir = tokenizer.dir;
  if (options.chat_template != "auto") source.chat_template = tokenizer.chat_template.source();
  return source;
}

}  // namespace nvfp4lm
