// See trainer.h. Set-up (options, resume, loading) first, then one optimizer step, checkpoints, and the run.
#include "train/trainer.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/json_text.h"
#include "core/logging.h"
#include "core/memory.h"
#include "core/stopwatch.h"
#include "io/hf_config.h"
#include "io/synth_model.h"
#include "tokenizer/chat_template.h"
#include "train/checkpoint.h"
#include "train/data/eval_split.h"
#include "train/data/whoami_data.h"
#include "train/train_step.h"

namespace nvfp4lm {
namespace {

using json = nlohmann::json;

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

int64_t input_tokens_of(const TokenBatch& batch) { return batch.rows() * batch.row_tokens() - batch.padding_tokens; }

// --synthetic: the tiny preset's shape with --in-features / --out-features as hidden and intermediate sizes.
Qwen3Config synthetic_config(const TrainOptions& options) {
  Qwen3Config config = qwen3_preset("tiny");
  if (options.in_features > 0) config.hidden_size = options.in_features;
  if (options.out_features > 0) config.intermediate_size = options.out_features;
  return config;
}

std::string synthetic_name(const Qwen3Config& config, uint64_t seed) {
  return fmt::format("synthetic:hidden={},intermediate={},layers={},seed={}", config.hidden_size,
                     config.intermediate_size, config.num_hidden_layers, seed);
}

}  // namespace

// ---- set-up ---------------------------------------------------------------------------------------------------

Trainer::Trainer(const TrainOptions& options, const std::set<std::string>& given) : options_(options) {
  NVFP4LM_CHECK(!options_.output.empty(), "--output is empty: name the run directory");
  // The run directory may exist (a run to resume, an empty directory) but must not be or hold what is read.
  guard_output_location(options_.output, "--output", read_paths());
  // One process per run directory for the whole run: two trainings into one --output would overwrite each
  // other's checkpoints and metrics. A run directory this constructor created is removed again if it fails.
  run_lock_ = std::make_unique<DirectoryLock>(options_.output);
  try {
    set_up(given);
  } catch (...) {
    run_lock_->release_and_remove_if_unused();
    throw;
  }
}

void Trainer::set_up(const std::set<std::string>& given) {
  if (options_.resume) resolve_resume(given);
  validate_train_options(options_);
  device_ = Device::parse(options_.device);
  const std::string unavailable = device_unavailable_reason(device_);
  NVFP4LM_CHECK(unavailable.empty(), "--device {}: {}; run `nvfp4lm diagnose` for details, or use --device cpu",
                options_.device, unavailable);
  if (options_.max_memory_gib > 0) {
    const double bytes = options_.max_memory_gib * 1024.0 * 1024.0 * 1024.0;
    NVFP4LM_CHECK(bytes >= 1, "--max-memory {} GiB is less than a byte", options_.max_memory_gib);
    MemoryTracker::instance().set_limit(device_, static_cast<size_t>(bytes));
  }
  if (!options_.resume) {
    const std::optional<CheckpointInfo> existing = latest_checkpoint(options_.output, VerifyLevel::Sizes);
    NVFP4LM_CHECK(!existing,
                  "{} already holds checkpoints (newest: {}); pass --resume to continue that run, or choose "
                  "another --output",
                  options_.output, existing ? existing->dir.filename().string() : "");
  }
  // Every output checked before the (long) load and training. --metrics and --memory-report replace an existing
  // file only when it is the run's own (the default metrics.jsonl, or the file the resumed run wrote under that
  // flag) or with --overwrite, and then only a regular file; never an input, a checkpoint or the run's copy of the
  // model's files, whatever --overwrite says.
  guard_output_location(options_.output, "--output", read_paths());  // the resumed run's paths
  replace_metrics_ = options_.overwrite || is_run_report(metrics_path(), resumed_metrics_);
  guard_run_output(metrics_path(), options_.metrics.empty() ? "the metrics file" : "--metrics", run_paths(),
                   replace_metrics_, OutputKind::File);
  if (!options_.memory_report.empty()) {
    replace_memory_report_ = options_.overwrite || is_run_report(options_.memory_report, resumed_memory_report_);
    std::vector<GuardedInput> protected_paths = run_paths();
    protected_paths.push_back({metrics_path(), "the metrics file"});
    guard_run_output(options_.memory_report, "--memory-report", protected_paths, replace_memory_report_,
                     OutputKind::File);
  }
  load();
  if (!options_.export_path.empty())
    check_export_target(options_.export_path, export_source(), options_.overwrite,
                        model_output_kind(options_.export_format));
  if (!options_.output_dat.empty()) check_dat_file_target(options_.output_dat, export_source(), options_.overwrite);
  if (resume_checkpoint_) restore_checkpoint();
  prepare_run_directory();
}

Trainer::~Trainer() = default;

void Trainer::resolve_resume(const std::set<std::string>& given) {
  std::error_code ec;
  NVFP4LM_CHECK(fs::is_directory(options_.output, ec),
                "--resume: the run directory {} does not exist (name it with --output)", options_.output);
  resume_checkpoint_ = latest_checkpoint(options_.output);
  NVFP4LM_CHECK(resume_checkpoint_.has_value(),
                "--resume: {} holds no complete checkpoint (step-N directories that verify); start a new run without "
                "--resume",
                options_.output);
  const json state = read_trainer_state(resume_checkpoint_->dir);
  const std::string where = resume_checkpoint_->dir.string();
  NVFP4LM_CHECK(state.contains("config"),
                "{}: trainer_state.json has no \"config\"; it was not written by `nvfp4lm "
                "train` and cannot be resumed",
                where);
  // The reports the run wrote, which the resumed run may replace as its own (saved as given; compared as real paths).
  const json& saved = state["config"];
  auto saved_path = [&](const char* key) {
    return saved.is_object() && saved.contains(key) && saved[key].is_string() ? saved[key].get<std::string>()
                                                                              : std::string();
  };
  resumed_metrics_ = saved_path("metrics");
  resumed_memory_report_ = saved_path("memory_report");
  options_ = resolve_resume_options(state["config"], options_, given, where);
}

fs::path Trainer::metrics_path() const {
  return options_.metrics.empty() ? fs::path(options_.output) / "metrics.jsonl" : fs::path(options_.metrics);
}

bool Trainer::is_run_report(const fs::path& path, const std::string& resumed) const {
  const fs::path real = real_path(path);
  if (real == real_path(fs::path(options_.output) / "metrics.jsonl")) return true;
  return options_.resume && !resumed.empty() && real == real_path(resumed);
}

void Trainer::load() {
  if (options_.synthetic) {
    const Qwen3Config shape = synthetic_config(options_);
    files_ = random_model_files(shape, synthetic_name(shape, options_.seed), options_.seed);
  } else {
    OpenModelOptions open_options;
    if (!options_.tokenizer.empty()) open_options.tokenizer_dir = options_.tokenizer;
    files_ = open_model(options_.model, open_options);
  }
  if (options_.max_layers > 0) {
    if (options_.max_layers > files_->config().num_hidden_layers)
      throw UsageError(fmt::format("--max-layers {} is more than the {} layers of {}; use 1..{}", options_.max_layers,
                                   files_->config().num_hidden_layers, files_->path().string(),
                                   files_->config().num_hidden_layers));
    files_->keep_first_layers(options_.max_layers);
  }
  const Qwen3Config& config = files_->config();

  std::optional<fs::path> tokenizer_dir =
      !options_.tokenizer.empty() ? fs::path(options_.tokenizer) : files_->tokenizer_dir();
  if (!tokenizer_dir && options_.synthetic) tokenizer_dir = find_bundled_tokenizer();
  NVFP4LM_CHECK(tokenizer_dir.has_value(),
                "{} has no tokenizer.json beside it; name a tokenizer directory with --tokenizer",
                options_.synthetic ? std::string("the --synthetic model (the bundled Qwen3 tokenizer was not found)")
                                   : "the model " + options_.model);
  tokenizer_.emplace(Tokenizer::load(*tokenizer_dir));
  tokenizer_dir_ = *tokenizer_dir;
  NVFP4LM_CHECK(static_cast<int64_t>(tokenizer_->vocab_size()) <= config.vocab_size,
                "the tokenizer {} has {} tokens but the model's vocabulary is {}; use the model's own tokenizer",
                tokenizer_->origin(), tokenizer_->vocab_size(), config.vocab_size);
  chat_template_.emplace(ChatTemplate::resolve(*tokenizer_, options_.chat_template));

  model_config_json_ = files_->config_json();
  const fs::path generation = files_->directory() / "generation_config.json";
  std::error_code ec;
  generation_config_json_ = !files_->directory().empty() && fs::is_regular_file(generation, ec)
                                ? read_json_file(generation)
                                : generation_config_to_json(config);

  // Rows longer than the model's context could not be trained (RoPE tables, attention) and only waste memory.
  NVFP4LM_CHECK(options_.seq_len <= config.max_position_embeddings,
                "--seq-len {} is longer than the model's context (max_position_embeddings {}); use at most that",
                options_.seq_len, config.max_position_embeddings);
  DatasetOptions data_options;
  data_options.format = options_.data_format;
  data_options.pair_template = options_.data_template;
  data_options.chat_template = chat_template_;
  data_options.train_reasoning = options_.train_reasoning;
  data_options.train_on_everything = options_.train_on_everything;
  data_options.strict = options_.strict;
  data_options.max_tokens = options_.seq_len;
  // --synthetic without --data: the identity data set of `nvfp4lm data whoami` (the defaults), made in memory.
  Dataset dataset = options_.data.empty()
                        ? parse_dataset(make_whoami_dataset(WhoamiOptions{}).jsonl, "the built-in whoami data set",
                                        DataFormat::Jsonl, *tokenizer_, data_options)
                        : read_dataset(options_.data, *tokenizer_, data_options);
  dataset_summary_ = dataset.summary;
  std::vector<Sample> held_out;
  if (options_.eval_split > 0) held_out = hold_out_samples(dataset.samples, options_.eval_split);
  load_eval_data(std::move(held_out), data_options, default_pad_id(*tokenizer_));
  DataLoaderOptions loader_options;
  loader_options.batch_size = options_.batch;
  loader_options.seq_len = options_.seq_len;
  loader_options.packing = options_.packing;
  loader_options.shuffle = true;
  loader_options.seed = options_.seed;
  loader_options.pad_id = default_pad_id(*tokenizer_);
  loader_ = std::make_unique<DataLoader>(std::move(dataset.samples), loader_options);

  if (options_.max_steps > 0) {
    total_steps_ = options_.max_steps;
  } else if (options_.steps_per_epoch > 0) {
    // Each epoch's steps: its batches grouped by grad_accum (the last group of an epoch may be short), capped.
    total_batches_ = 0;
    total_steps_ = 0;
    epoch_first_steps_.clear();
    for (int64_t epoch = 0; epoch < options_.epochs; ++epoch) {
      const int64_t batches = loader_->batches_in_epoch(epoch);
      const int64_t steps =
          std::min(options_.steps_per_epoch, (batches + options_.grad_accum - 1) / options_.grad_accum);
      epoch_first_steps_.push_back(total_steps_);
      total_steps_ += steps;
      total_batches_ += std::min(batches, steps * options_.grad_accum);
    }
  } else {
    total_batches_ = loader_->total_batches(options_.epochs);
    total_steps_ = (total_batches_ + options_.grad_accum - 1) / options_.grad_accum;
  }
  // A batch far larger than the data trains mostly padding, slowly: say so instead of running "forever".
  const int64_t batch_tokens = options_.batch * options_.seq_len;
  if (dataset_summary_.tokens > 0 && batch_tokens > 4 * dataset_summary_.tokens) {
    log::warn(
        "one micro-batch holds {} tokens (--batch {} x --seq-len {}) but the whole data set has {}: over {:.0f}% "
        "of every step is padding; lower --seq-len or --batch",
        batch_tokens, options_.batch, options_.seq_len, dataset_summary_.tokens,
        100.0 * (1.0 - static_cast<double>(dataset_summary_.tokens) / static_cast<double>(batch_tokens)));
  }
  if (options_.max_steps == 0 && options_.grad_accum > total_batches_) {
    log::warn("--grad-accum {} is more than the {} micro-batches of the whole run: it makes a single optimizer step",
              options_.grad_accum, total_batches_);
  }
  NVFP4LM_CHECK(options_.warmup <= total_steps_, "--warmup {} is longer than the run ({} optimizer steps)",
                options_.warmup, total_steps_);
  schedule_.decay = options_.lr_schedule;
  schedule_.peak_lr = options_.lr;
  schedule_.warmup_steps = options_.warmup;
  schedule_.total_steps = total_steps_;
  schedule_.min_lr_ratio = options_.min_lr_ratio;
  check_lr_schedule(schedule_);

  TrainModelOptions model_options;
  model_options.qat = options_.qat;
  model_options.block = options_.block;
  model_options.quantize_lm_head = options_.quantize_lm_head;
  // N <= 0 trains everything, as in the F# predecessor (where 0 was the default).
  model_options.train_last_layers = options_.train_last_layers > 0 ? options_.train_last_layers : -1;
  model_options.device = device_;
  model_options.bf16_master = options_.bf16_master;
  model_options.recompute = options_.recompute;
  model_options.fused_update = options_.fused_update;
  model_options.packed_weights = options_.packed_weights;
  if (options_.train_last_layers > config.num_hidden_layers)
    throw UsageError(
        fmt::format("--train-last-layers {} is more than the {} layers of the model: use 1..{}, or 0 to "
                    "train every parameter",
                    options_.train_last_layers, config.num_hidden_layers, config.num_hidden_layers));
  model_.emplace(Qwen3Trainable::from_files(*files_, model_options));

  AdamWOptions adamw;
  adamw.weight_decay = options_.weight_decay;
  adamw.seed = options_.seed;
  check_adamw_options(adamw);
  optimizer_ = make_optimizer(options_.optimizer, model_->parameters(), adamw);
  optimizer_->set_chunk_rows(options_.step_chunk_rows);
}

void Trainer::load_eval_data(std::vector<Sample> held_out, const DatasetOptions& data_options, int32_t pad_id) {
  if (!options_.has_eval()) return;
  std::vector<Sample> samples = std::move(held_out);
  if (!options_.eval_data.empty()) {
    DatasetOptions eval_options = data_options;
    eval_options.goal = "evaluate";
    samples = read_dataset(options_.eval_data, *tokenizer_, eval_options).samples;
  }
  eval_samples_ = static_cast<int64_t>(samples.size());
  // Training's batching in file order: DataLoader without shuffling, one epoch.
  DataLoaderOptions eval_loader_options;
  eval_loader_options.batch_size = options_.batch;
  eval_loader_options.seq_len = options_.seq_len;
  eval_loader_options.packing = options_.packing;
  eval_loader_options.shuffle = false;
  eval_loader_options.pad_id = pad_id;
  DataLoader eval_loader(std::move(samples), eval_loader_options);
  const int64_t batches = eval_loader.batches_in_epoch(0);
  for (int64_t i = 0; i < batches; ++i) {
    const TokenBatch batch = eval_loader.next_batch();
    eval_tokens_ += batch.tokens_in_batch;
    eval_batches_.push_back({batch.ids, batch.targets, batch.positions, batch.segment_ids});
  }
}

bool Trainer::evaluates_at(int64_t step) const {
  return options_.has_eval() && (step == total_steps_ || (options_.eval_every > 0 && step % options_.eval_every == 0));
}

EvalMetrics Trainer::evaluate() {
  NVFP4LM_CHECK(!eval_batches_.empty(), "no evaluation data (--eval-data FILE or --eval-split F)");
  const Clock::time_point start = Clock::now();
  const MemoryPhase phase("evaluate");
  LossStats total;
  for (const TrainBatch& batch : eval_batches_) {
    const LossStats stats = model_->evaluate(batch, options_.loss);
    total.loss_sum += stats.loss_sum;
    total.tokens += stats.tokens;
    total.correct += stats.correct;
  }
  EvalMetrics eval;
  eval.tokens = total.tokens;
  eval.loss = total.mean();
  eval.perplexity = std::exp(eval.loss);
  eval.token_accuracy = total.tokens > 0 ? static_cast<double>(total.correct) / static_cast<double>(total.tokens) : 0;
  eval.seconds = seconds_between(start, Clock::now());
  return eval;
}

void Trainer::restore_checkpoint() {
  const fs::path& dir = resume_checkpoint_->dir;
  std::vector<Parameter> masters;
  for (const NamedTensor& master : model_->master_weights()) masters.push_back({master.name, master.tensor, {}, false});
  // latest_checkpoint() verified the checksums a moment ago.
  const json state = load_checkpoint(dir, masters, *optimizer_, VerifyLevel::Sizes);
  model_->refresh_quantized();
  const std::string where = (dir / kTrainerStateFileName).string();
  NVFP4LM_CHECK(state.contains("data_position"), "{}: \"data_position\" is missing", where);
  loader_->restore(state["data_position"]);
  step_ = state["step"].get<int64_t>();
  const json totals = json_field_or(state, "totals", json::object(), where);
  skipped_steps_ = json_field_or(totals, "skipped_steps", int64_t{0}, where);
  total_loss_tokens_ = json_field_or(totals, "loss_tokens", int64_t{0}, where);
  best_loss_ = json_field_or(totals, "best_loss", 0.0, where);
  best_step_ = json_field_or(totals, "best_step", int64_t{0}, where);
  best_eval_loss_ = json_field_or(totals, "best_eval_loss", 0.0, where);
  best_eval_step_ = json_field_or(totals, "best_eval_step", int64_t{0}, where);
  if (state.contains("calibration"))
    calibration_ = ActivationCalibration::from_json(state["calibration"], where + " \"calibration\"");
  for (const json& record : json_field_or(state, "metrics", json::array(), where)) metrics_tail_.push_back(record);
  if (!metrics_tail_.empty() && metrics_tail_.back().contains("loss") && metrics_tail_.back()["loss"].is_number())
    last_loss_ = metrics_tail_.back()["loss"].get<double>();
  const int64_t saved_total = json_field_or(totals, "total_steps", total_steps_, where);
  if (saved_total != total_steps_)
    log::warn("the run now has {} steps (it had {}); the LR schedule is stretched to the new length", total_steps_,
              saved_total);
  NVFP4LM_CHECK(step_ <= total_steps_,
                "--resume: the checkpoint is at step {} but the run has only {} steps; raise --max-steps or --epochs",
                step_, total_steps_);
  resumed_from_ = step_;
}

void Trainer::prepare_run_directory() {
  const fs::path run_dir = options_.output;
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  NVFP4LM_CHECK(!ec, "cannot create the run directory {}: {}", run_dir.string(), ec.message());
  // The model's small files, once per run, for exports from checkpoints (written aside, then renamed).
  const fs::path copy = run_dir / kSourceModelDirName;
  if (!fs::exists(copy, ec)) {
    StagedDirectory staged(copy);
    write_file_atomic(staged.path() / "config.json", model_config_json_.dump(2) + "\n", /*overwrite=*/false);
    if (generation_config_json_)
      write_file_atomic(staged.path() / "generation_config.json", generation_config_json_->dump(2) + "\n",
                        /*overwrite=*/false);
    for (const fs::path& file : tokenizer_side_files(tokenizer_dir_)) {
      fs::copy_file(file, staged.path() / file.filename(), fs::copy_options::overwrite_existing, ec);
      NVFP4LM_CHECK(!ec, "cannot copy {} into {}: {}", file.string(), staged.path().string(), ec.message());
    }
    // Trained with another template than the tokenizer's own: exports carry it as chat_template.jinja (which
    // transformers, vLLM and this program prefer to tokenizer_config.json's), so the model is asked as it was trained.
    if (options_.chat_template != "auto")
      write_file_atomic(staged.path() / "chat_template.jinja", chat_template_->source(), /*overwrite=*/true);
    staged.publish(/*overwrite=*/false, "the run's copy of the model's files");
  }
  metrics_file_ = std::make_unique<MetricsFile>(metrics_path(), resumed_from_ ? *resumed_from_ : -1, replace_metrics_);
}

std::string Trainer::compute_path() const {
  return fmt::format("{}/{}", device_.is_cpu() ? "cpu" : "cuda",
                     options_.qat == QatMode::Off ? "dense" : "dequant-gemm");
}

std::string Trainer::precision() const {
  return fmt::format("{} activations{}, {} master weights, fp32 gradients", device_.is_cpu() ? "fp32" : "bf16",
                     device_.is_cpu() ? "" : " (fp32 accumulation)",
                     options_.bf16_master ? "bf16 (stochastic rounding)" : "fp32");
}

std::vector<std::string> Trainer::setup_lines() const {
  std::vector<std::string> lines;
  const Qwen3Config& config = model_->config();
  lines.push_back(fmt::format(
      "model {} ({}, {} layers{}, hidden {}, vocab {}, {:.1f}M parameters)", files_->path().string(),
      options_.synthetic ? "random, in memory (--synthetic)" : std::string(model_format_name(files_->format())),
      config.num_hidden_layers, options_.max_layers > 0 ? " (the first ones only: --max-layers)" : "",
      config.hidden_size, config.vocab_size, config.total_parameters() / 1e6));
  lines.push_back("training " + model_->describe());
  for (const std::string& line : split_lines(describe_dataset_summary(dataset_summary_))) lines.push_back(line);
  if (options_.has_eval()) {
    lines.push_back(fmt::format(
        "evaluation: {} samples ({} scored tokens) {}, {}{}", eval_samples_, eval_tokens_,
        options_.eval_data.empty()
            ? fmt::format("held out of the training data (--eval-split {:g})", options_.eval_split)
            : "from " + options_.eval_data,
        options_.eval_every > 0 ? fmt::format("every {} steps and at the end", options_.eval_every)
                                : std::string("at the end"),
        options_.save_best ? "; the checkpoint with the lowest evaluation loss is kept (--save-best)" : ""));
  }
  if (options_.calibrate_steps > 0)
    lines.push_back(
        fmt::format("activation calibration: input ranges recorded during the last {} steps, written as "
                    "the ModelOpt export's input_scale",
                    std::min(options_.calibrate_steps, total_steps_)));
  lines.push_back(fmt::format("chat template: {}; data template {}{}{}", chat_template_->origin(),
                              pair_template_name(options_.data_template),
                              options_.train_on_everything ? ", training on every token" : "",
                              options_.train_reasoning ? "" : ", reasoning not trained"));
  int64_t trained = 0;
  for (const Parameter& p : model_->parameters()) trained += p.value.numel();
  lines.push_back(fmt::format("parameters trained: {} ({:.2f}M) in {} tensors, of {:.2f}M", trained, trained / 1e6,
                              model_->parameters().size(), config.total_parameters() / 1e6));
  lines.push_back(
      fmt::format("optimizer {} (weight decay {}, betas 0.9/0.95), state {:.1f} MiB; lr {:g} {} "
                  "(warmup {}, min ratio {:g}), max grad norm {:g}",
                  options_.optimizer, options_.weight_decay, to_mib(optimizer_->state_bytes()), options_.lr,
                  lr_decay_name(options_.lr_schedule), options_.warmup, options_.min_lr_ratio, options_.max_grad_norm));
  const std::string length =
      options_.max_steps > 0 ? fmt::format("{} steps (--max-steps)", total_steps_)
      : options_.steps_per_epoch > 0
          ? fmt::format("{} steps = {} epochs of at most {} steps (--steps-per-epoch; {} batches, grad-accum {})",
                        total_steps_, options_.epochs, options_.steps_per_epoch, total_batches_, options_.grad_accum)
          : fmt::format("{} steps = {} epochs x {} batches / grad-accum {}", total_steps_, options_.epochs,
                        options_.epochs > 0 ? total_batches_ / options_.epochs : 0, options_.grad_accum);
  lines.push_back(fmt::format("{}; batch {} rows x {} tokens ({}), loss {}, seed {}", length, options_.batch,
                              options_.seq_len, options_.packing ? "packed" : "one sample a row",
                              loss_kind_name(options_.loss), options_.seed));
  if (resumed_from_)
    lines.push_back(
        fmt::format("resuming {} at step {} of {}", resume_checkpoint_->dir.string(), *resumed_from_, total_steps_));
  lines.push_back(fmt::format("run directory {} (checkpoints {}, keeping {}; metrics {})", options_.output,
                              options_.save_every > 0
                                  ? fmt::format("every {} steps and at the end", options_.save_every)
                                  : std::string("at the end"),
                              options_.keep, metrics_file_->path().string()));
  return lines;
}

// ---- one step -------------------------------------------------------------------------------------------------

StepMetrics Trainer::train_step() {
  NVFP4LM_CHECK(!done(), "the run is complete ({} of {} steps)", step_, total_steps_);
  const Clock::time_point start = Clock::now();
  if (!session_start_) session_start_ = start;

  StepMetrics m;
  m.step = step_ + 1;
  m.total_steps = total_steps_;
  std::vector<TokenBatch> batches;
  if (!epoch_first_steps_.empty()) {
    // --steps-per-epoch: start this step's epoch (leaving the rest of a capped one); a step ends with its epoch.
    const auto next_epoch = std::upper_bound(epoch_first_steps_.begin(), epoch_first_steps_.end(), step_);
    loader_->start_epoch(next_epoch - epoch_first_steps_.begin() - 1);
    while (static_cast<int64_t>(batches.size()) < options_.grad_accum) {
      batches.push_back(loader_->next_batch());
      if (batches.back().ends_epoch) break;
    }
  } else {
    const int64_t micro_batches = options_.max_steps > 0
                                      ? options_.grad_accum
                                      : std::min(options_.grad_accum, total_batches_ - step_ * options_.grad_accum);
    for (int64_t i = 0; i < micro_batches; ++i) batches.push_back(loader_->next_batch());
  }
  m.micro_batches = static_cast<int>(batches.size());
  NVFP4LM_ASSERT(m.micro_batches >= 1, "step {} has no micro-batches", m.step);
  for (const TokenBatch& batch : batches) {
    m.loss_tokens += batch.tokens_in_batch;
    m.input_tokens += input_tokens_of(batch);
  }
  // Every sample carries a trained token (dataset.h), so a batch always does.
  NVFP4LM_ASSERT(m.loss_tokens > 0, "step {}: no trained tokens in its batches", m.step);

  model_->zero_grad();
  m.lr = lr_at(schedule_, step_);
  // --calibrate-steps: this step's forward passes record activation ranges (not the evaluation's below).
  const bool record = options_.calibrate_steps > 0 && step_ >= total_steps_ - options_.calibrate_steps;
  if (record) {
    if (calibration_.source.empty())
      calibration_.source = fmt::format("train --calibrate-steps {} (from step {})", options_.calibrate_steps, m.step);
    model_->set_calibration(&calibration_);
  }
  try {
    if (options_.fused_update) {
      NVFP4LM_ASSERT(batches.size() == 1, "--fused-update with {} micro-batches", batches.size());
      fused_update(m, batches.front());
    } else {
      separate_update(m, batches);
    }
  } catch (...) {
    model_->set_calibration(nullptr);
    throw;
  }
  model_->set_calibration(nullptr);
  ++step_;

  const Clock::time_point end = Clock::now();
  ++session_steps_;
  session_loss_tokens_ += m.loss_tokens;
  session_input_tokens_ += m.input_tokens;
  total_loss_tokens_ += m.loss_tokens;
  m.epoch = static_cast<double>(loader_->epoch()) +
            static_cast<double>(loader_->next_sample()) / static_cast<double>(loader_->samples().size());
  m.step_seconds = seconds_between(start, end);
  m.tokens_per_second = m.step_seconds > 0 ? static_cast<double>(m.input_tokens) / m.step_seconds : 0;
  m.elapsed_seconds = seconds_between(*session_start_, end);
  m.eta_seconds = m.elapsed_seconds / static_cast<double>(session_steps_) * static_cast<double>(total_steps_ - step_);
  const MemoryTracker& tracker = MemoryTracker::instance();
  m.device_bytes = tracker.current_bytes(device_);
  m.device_peak_bytes = tracker.peak_bytes(device_);
  m.rss_bytes = current_rss_bytes();
  if (!m.skipped) {
    last_loss_ = m.loss;
    if (best_step_ == 0 || m.loss < best_loss_) {
      best_loss_ = m.loss;
      best_step_ = m.step;
    }
  }
  if (evaluates_at(step_)) {
    m.eval = evaluate();
    if (std::isfinite(m.eval->loss) && (best_eval_step_ == 0 || m.eval->loss < best_eval_loss_)) {
      best_eval_loss_ = m.eval->loss;
      best_eval_step_ = m.step;
      m.eval->best = true;
    }
  }

  metrics_file_->append(m);
  metrics_tail_.push_back(step_metrics_json(m));
  while (metrics_tail_.size() > kMetricsTail) metrics_tail_.pop_front();
  return m;
}

void Trainer::separate_update(StepMetrics& m, const std::vector<TokenBatch>& batches) {
  std::vector<TrainBatch> micro_batches;
  for (const TokenBatch& batch : batches)
    micro_batches.push_back({batch.ids, batch.targets, batch.positions, batch.segment_ids});
  const auto grad_scale = static_cast<float>(1.0 / static_cast<double>(m.loss_tokens));
  const LossStats total = accumulate_gradients(*model_, micro_batches, grad_scale, options_.loss);
  NVFP4LM_ASSERT(total.tokens == m.loss_tokens, "step {}: the model counted {} trained tokens, the batches {}", m.step,
                 total.tokens, m.loss_tokens);
  m.loss = total.loss_sum / static_cast<double>(m.loss_tokens);
  m.token_accuracy = static_cast<double>(total.correct) / static_cast<double>(m.loss_tokens);

  const UpdateResult update = apply_update(*model_, *optimizer_, m.loss, m.lr, options_.max_grad_norm);
  m.grad_norm = update.grad_norm;
  if (!update.applied) {
    report_nonfinite(m, !std::isfinite(m.loss) ? "non-finite loss" : "non-finite gradient norm", false);
    model_->zero_grad();
    return;
  }
  m.clip_coefficient = update.clip_coefficient;
}

void Trainer::fused_update(StepMetrics& m, const TokenBatch& batch) {
  const MemoryPhase phase("forward");
  const auto grad_scale = static_cast<float>(1.0 / static_cast<double>(m.loss_tokens));
  const TrainBatch train_batch{batch.ids, batch.targets, batch.positions, batch.segment_ids};
  const FusedStepResult result = fused_train_step(*model_, *optimizer_, train_batch, grad_scale, options_.loss, m.lr);
  NVFP4LM_ASSERT(result.stats.tokens == m.loss_tokens, "step {}: the model counted {} trained tokens, the batch {}",
                 m.step, result.stats.tokens, m.loss_tokens);
  m.loss = result.stats.loss_sum / static_cast<double>(m.loss_tokens);
  m.token_accuracy = static_cast<double>(result.stats.correct) / static_cast<double>(m.loss_tokens);
  m.grad_norm = result.grad_norm;
  if (!result.applied) {
    report_nonfinite(m, "non-finite loss", false);
  } else if (!result.skipped_groups.empty()) {
    report_nonfinite(m,
                     fmt::format("non-finite gradient in {} parameter group(s) (first: {}), which kept their weights",
                                 result.skipped_groups.size(), result.skipped_groups.front()),
                     true);
  }
  // Delivered groups are zeroed by the model; a non-finite loss returns before any delivery, with the loss
  // head's gradients (lm_head, a tied embedding) already accumulated.
  if (!result.applied) model_->zero_grad();
}

void Trainer::report_nonfinite(StepMetrics& m, const std::string& reason, bool partly_applied) {
  m.skip_reason = reason;
  NVFP4LM_CHECK(options_.nonfinite == NonFinitePolicy::Skip,
                "step {}: {} (loss {}, gradient norm {}); stopping (--nonfinite stop). {}; the newest checkpoint "
                "in {} is intact",
                m.step, reason, m.loss, m.grad_norm,
                partly_applied
                    ? "The rest of this step's update was applied in memory (--fused-update) and is not saved"
                    : "Nothing of this step was applied or saved",
                options_.output);
  if (partly_applied) {
    log::warn("step {}: {} (loss {}, gradient norm {}); the other groups were updated (--fused-update)", m.step, reason,
              m.loss, m.grad_norm);
    return;
  }
  m.skipped = true;
  ++skipped_steps_;
  log::warn("step {}: {} (loss {}, gradient norm {}); step skipped, no update made (--nonfinite skip)", m.step, reason,
            m.loss, m.grad_norm);
}

// ---- checkpoints and export -----------------------------------------------------------------------------------

json Trainer::trainer_state() const {
  json metrics = json::array();
  for (const json& record : metrics_tail_) metrics.push_back(record);
  json state = {{"config", train_options_to_json(options_)},
                {"epoch", loader_->epoch()},
                {"data_position", loader_->state()},
                {"rng", json::object()},
                {"seeds", {{"data_order", options_.seed}, {"stochastic_rounding", options_.seed}}},
                {"model",
                 {{"config", model_config_json_},
                  {"generation_config", generation_config_json_ ? *generation_config_json_ : json(nullptr)},
                  {"source", options_.model.empty() ? std::string() : real_path(options_.model).string()}}},
                {"totals",
                 {{"total_steps", total_steps_},
                  {"loss_tokens", total_loss_tokens_},
                  {"skipped_steps", skipped_steps_},
                  {"best_loss", best_loss_},
                  {"best_step", best_step_},
                  {"best_eval_loss", best_eval_loss_},
                  {"best_eval_step", best_eval_step_}}},
                {"metrics", metrics}};
  if (!calibration_.empty()) state["calibration"] = calibration_.to_json();
  return state;
}

fs::path Trainer::save_checkpoint() {
  const MemoryPhase phase("checkpoint");
  const std::vector<NamedTensor> masters = model_->master_weights();
  const fs::path dir = ::nvfp4lm::save_checkpoint(options_.output, step_, masters, optimizer_->state_tensors(),
                                                  optimizer_->describe(), trainer_state());
  std::optional<int64_t> best;
  if (options_.save_best && best_eval_step_ > 0) best = best_eval_step_;
  prune_checkpoints(options_.output, options_.keep, VerifyLevel::Sizes, best);
  return dir;
}

ExportSource Trainer::export_source() const {
  ExportSource source;
  source.config_json = model_config_json_;
  source.generation_config = generation_config_json_;
  const fs::path copy = fs::path(options_.output) / kSourceModelDirName;
  std::error_code ec;
  source.side_files = tokenizer_side_files(fs::is_directory(copy, ec) ? copy : tokenizer_dir_);
  // An --overwrite export replaces OUT as a whole: it must not hold the model, tokenizer or data it was trained
  // from, nor the run's own files.
  source.protected_paths = run_paths();
  if (!options_.metrics.empty()) source.protected_paths.push_back({options_.metrics, "the --metrics file"});
  if (!options_.memory_report.empty())
    source.protected_paths.push_back({options_.memory_report, "the --memory-report file"});
  return source;
}

std::vector<GuardedInput> Trainer::run_paths() const {
  std::vector<GuardedInput> paths = read_paths();
  paths.push_back({options_.output, "the run directory", /*may_hold_outputs=*/true});
  paths.push_back({fs::path(options_.output) / kSourceModelDirName, "the run's copy of the source model's files"});
  for (const fs::path& checkpoint : run_checkpoint_dirs(options_.output))
    paths.push_back({checkpoint, "the run's checkpoint"});
  return paths;
}

std::vector<GuardedInput> Trainer::read_paths() const {
  std::vector<GuardedInput> inputs;
  if (!options_.model.empty()) inputs.push_back({options_.model, "the model (--model)"});
  if (!options_.data.empty()) inputs.push_back({options_.data, "the training data (--data)"});
  if (!options_.eval_data.empty()) inputs.push_back({options_.eval_data, "the evaluation data (--eval-data)"});
  if (!options_.tokenizer.empty()) inputs.push_back({options_.tokenizer, "the tokenizer (--tokenizer)"});
  if (files_ && files_->path() != files_->directory()) inputs.push_back({files_->config_path(), "the model's config"});
  return inputs;
}

ExportReport Trainer::export_model() {
  NVFP4LM_CHECK(!options_.export_path.empty() || !options_.output_dat.empty(),
                "no export path (--export OUT or --output-dat FILE)");
  ExportOptions export_options;
  export_options.format = options_.export_format;
  export_options.block = options_.block;
  export_options.quantize_lm_head = options_.quantize_lm_head;
  export_options.overwrite = options_.overwrite;
  if (!calibration_.empty() && options_.export_format == ModelFormat::ModeloptNvfp4)
    export_options.calibration = calibration_;
  const std::vector<NamedTensor> masters = model_->master_weights();
  if (!options_.output_dat.empty()) {
    export_options.format = ModelFormat::Dat;
    return export_dat_file(masters, export_source(), options_.output_dat, export_options);
  }
  return export_weights(masters, export_source(), options_.export_path, export_options);
}

// ---- the run --------------------------------------------------------------------------------------------------

TrainSummary Trainer::run(const Progress& progress) {
  TrainSummary summary;
  summary.start_step = step_;
  auto before_output = [&] {
    if (progress.before_output) progress.before_output();
  };
  if (done()) {
    before_output();
    log::info("the run is already complete ({} of {} steps); nothing to train", step_, total_steps_);
  }
  std::optional<int64_t> saved_step = resumed_from_;
  while (!done()) {
    const StepMetrics metrics = train_step();
    if (progress.on_step) progress.on_step(metrics);
    const bool new_best = options_.save_best && metrics.eval && metrics.eval->best;
    if (((options_.save_every > 0 && step_ % options_.save_every == 0) || new_best) && !done()) {
      before_output();
      save_checkpoint();
      saved_step = step_;
    }
  }
  before_output();
  if (saved_step != step_) save_checkpoint();
  if (!options_.export_path.empty() || !options_.output_dat.empty()) summary.export_report = export_model();

  const json memory = memory_report_json(device_);
  summary.memory_text = format_memory_report(memory);
  if (!options_.memory_report.empty()) {
    write_file_atomic(options_.memory_report, memory.dump(2) + "\n", replace_memory_report_);
    summary.memory_report_path = options_.memory_report;
  }
  summary.steps = step_;
  summary.total_steps = total_steps_;
  summary.skipped_steps = skipped_steps_;
  summary.loss_tokens = session_loss_tokens_;
  summary.input_tokens = session_input_tokens_;
  summary.seconds = session_start_ ? seconds_between(*session_start_, Clock::now()) : 0;
  summary.final_loss = last_loss_;
  summary.best_loss = best_loss_;
  summary.best_step = best_step_;
  summary.best_eval_loss = best_eval_loss_;
  summary.best_eval_step = best_eval_step_;
  if (options_.save_best && best_eval_step_ > 0) {
    std::error_code ec;
    if (fs::is_directory(checkpoint_dir(options_.output, best_eval_step_), ec))
      summary.best_checkpoint = checkpoint_dir(options_.output, best_eval_step_);
  }
  for (int64_t s = step_; s >= 0; --s) {
    std::error_code ec;
    if (fs::is_directory(checkpoint_dir(options_.output, s), ec))
      summary.checkpoints.insert(summary.checkpoints.begin(), checkpoint_dir(options_.output, s));
    if (static_cast<int>(summary.checkpoints.size()) >= options_.keep) break;
  }
  summary.metrics_path = metrics_file_->path();
  return summary;
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
    lines.push_back(fmt::format("evaluation loss: best {:.4f} (perplexity {:.2f}) at step {}{}", s.best_eval_loss,
                                std::exp(s.best_eval_loss), s.best_eval_step,
                                s.best_checkpoint
                                    ? fmt::format(", kept in {} (--save-best; export it with `nvfp4lm "
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
