// The training loop (see trainer.h): set-up, then optimizer steps until the plan is done, with evaluations,
// checkpoints and the export. What each part needs lives in its own room (train_setup.h, run_directory.h,
// step_plan.h, train_step.h, run_totals.h); this file is the order in which they are called.
#include "train/trainer.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/json_text.h"
#include "core/logging.h"
#include "core/memory.h"
#include "core/memory_guard.h"
#include "core/rng.h"
#include "io/model_formats.h"
#include "io/model_writer.h"
#include "train/dist/gather_state.h"
#include "train/dist/mpi_communicator.h"
#include "train/dist/ordered_reduce.h"
#include "train/grpo_reference.h"
#include "train/train_step.h"

namespace nvfp4lm {

using json = nlohmann::json;

namespace {

// A preference objective's means over the pairs of `stats` (metrics.h PreferenceMetrics).
PreferenceMetrics preference_metrics(const LossStats& stats) {
  PreferenceMetrics p;
  p.pairs = stats.pairs;
  const auto n = static_cast<double>(std::max<int64_t>(stats.pairs, 1));
  p.chosen_reward = stats.chosen_reward_sum / n;
  p.rejected_reward = stats.rejected_reward_sum / n;
  p.margin = (stats.chosen_reward_sum - stats.rejected_reward_sum) / n;
  p.accuracy = static_cast<double>(stats.preferred) / n;
  p.chosen_logp = stats.chosen_logp_sum / n;
  p.rejected_logp = stats.rejected_logp_sum / n;
  return p;
}

}  // namespace

// ---- set-up ---------------------------------------------------------------------------------------------------

Trainer::Trainer(const TrainOptions& options, const std::set<std::string>& given, Communicator* ranks)
    : options_(options) {
  if (ranks == nullptr) single_process_ = std::make_unique<SingleProcess>();
  comm_ = ranks != nullptr ? ranks : single_process_.get();
  if (writes_outputs()) run_dir_ = std::make_unique<RunDirectory>(options_.output, read_paths());
  try {
    set_up(given);
  } catch (...) {
    if (run_dir_) run_dir_->abandon();  // a run directory this constructor created is removed again
    throw;
  }
}

Trainer::~Trainer() = default;

void Trainer::set_up(const std::set<std::string>& given) {
  if (options_.resume) {
    resume_ = run_dir_ ? run_dir_->resume_point() : read_resume_point(options_.output);
    options_ = resolve_resume_options(resume_->state["config"], options_, given, resume_->checkpoint.dir.string());
  }
  validate_train_options(options_);
  device_ = open_device(rank_device(), options_.max_memory_gib);
  if (options_.gpu_limit_gb > 0)
    memory_guard_ = std::make_unique<MemoryGuard>(device_, MemoryGuardOptions{.limit_gib = options_.gpu_limit_gb,
                                                                              .over_seconds = options_.gpu_over_secs,
                                                                              .poll_seconds = options_.gpu_poll_secs});
  check_data_parallel();
  if (run_dir_) {
    if (!options_.resume) run_dir_->check_new_run(options_.overwrite);
    // Every output is checked before the (long) load and training.
    run_dir_->check_reports(options_.metrics, options_.memory_report, options_.overwrite, read_paths(),
                            resume_ ? &*resume_ : nullptr);
  }
  load();
  if (run_dir_ && !options_.export_path.empty())
    check_export_target(options_.export_path, export_source(), options_.overwrite,
                        model_output_kind(options_.export_format));
  if (run_dir_ && !options_.output_dat.empty())
    check_dat_file_target(options_.output_dat, export_source(), options_.overwrite);
  if (resume_) restore_checkpoint();
  // A teacher cache must hold every sample the rest of the run will take: found now, not at the step that needs it.
  check_teacher_cache_covers(teacher_ ? &*teacher_ : nullptr, plan_, *data_.loader, step_);
  if (run_dir_) run_dir_->prepare(source_, resumed_from_);
  check_ranks_agree();
}

std::string Trainer::rank_device() const {
  // `--device cuda` on several ranks: one GPU a rank, the rank's index on its node (the emulated device is one per
  // process). An explicit cuda:N is taken as given.
  if (comm_->size() == 1 || options_.device != "cuda" || cuda_is_emulated()) return options_.device;
  const int local = local_rank_from_environment();
  const Device device = Device::cuda(local >= 0 ? local : comm_->rank());
  const std::string reason = device_unavailable_reason(device);
  NVFP4LM_CHECK(
      reason.empty(),
      "rank {} of {} ({}) trains on {}: {}; a data-parallel GPU run takes one GPU a rank, so start at most as "
      "many ranks a node as it has GPUs (mpirun --npernode G, srun --ntasks-per-node G)",
      comm_->rank(), comm_->size(),
      local >= 0 ? fmt::format("local rank {} on its node", local) : std::string("no local rank given"), device.str(),
      reason);
  return device.str();
}

void Trainer::check_data_parallel() const {
  const int ranks = comm_->size();
  if (ranks == 1) return;
  NVFP4LM_CHECK(options_.objective != TrainObjective::Grpo,
                "--objective grpo runs in one process for now (every rank would sample every completion): start one "
                "rank");
  NVFP4LM_CHECK(!options_.fused_update,
                "--fused-update updates each parameter inside the backward, before the ranks' gradients are summed; "
                "leave it out for a data-parallel run ({} ranks)",
                ranks);
  NVFP4LM_CHECK(options_.grad_accum % ranks == 0,
                "--grad-accum {} over {} ranks: each rank takes the same number of a step's micro-batches, so "
                "--grad-accum must be a multiple of the ranks (--grad-accum {} keeps the global batch {} rows)",
                options_.grad_accum, ranks, ((options_.grad_accum + ranks - 1) / ranks) * ranks,
                ((options_.grad_accum + ranks - 1) / ranks) * ranks * options_.batch);
}

void Trainer::check_ranks_agree() const {
  // Every rank must train the same run from the same point: a difference would be a silent wrong sum.
  const std::string mine = fmt::format("step {} of {}, {} parameters, seed {}", step_, plan_.total_steps,
                                       model_->parameters().size(), options_.seed);
  const std::vector<std::string> all = all_gather_strings(*comm_, mine);
  for (size_t r = 1; r < all.size(); ++r)
    NVFP4LM_CHECK(all[r] == all[0], "the ranks set up different runs: rank 0 has {}, rank {} has {}", all[0], r,
                  all[r]);
}

void Trainer::load() {
  files_ = open_training_model(options_);
  tokenizer_.emplace(load_training_tokenizer(options_, *files_));
  source_ = source_model_files(options_, *files_, *tokenizer_);
  data_ = load_training_data(options_, *tokenizer_, files_->config());
  plan_ = plan_training_steps(options_, *data_.loader, data_.summary);
  schedule_ = training_schedule(options_, plan_.total_steps);
  model_.emplace(build_trainable_model(options_, *files_, device_));
  if (device_.is_cpu() && !options_.fused_update) {
    data_parallel_ = std::make_unique<DataParallel>(*comm_, model_->parameters());
  } else if (comm_->size() > 1) {  // GPUs: one a rank, their gradients and masters moved by NCCL (or its stand-in)
    device_collectives_ = make_device_collectives(*comm_, device_);
    data_parallel_ = std::make_unique<DataParallel>(*comm_, model_->parameters(), device_collectives_.get());
  }
  optimizer_ = make_training_optimizer(options_, data_parallel_ ? data_parallel_->owned() : model_->parameters());
  teacher_ = load_distillation_teacher(options_, *files_, tokenizer_->tokenizer, device_);
  for (TrainBatch& batch : data_.eval.batches) attach_teacher_top_k(teacher_ ? &*teacher_ : nullptr, batch);
  if (options_.objective == TrainObjective::Dpo) {
    // The reference is the model as loaded, before any step (and before a resumed run restores its checkpoint):
    // every start of the run computes the same log-probabilities (on the CPU bit for bit), so none is saved.
    const Clock::time_point start = Clock::now();
    const MemoryPhase phase("reference");
    data_.reference_logps = reference_logps(*model_, *data_.loader);
    for (TrainBatch& batch : data_.eval.batches) batch.reference_logps = model_->completion_logps(batch);
    reference_seconds_ = seconds_between(start, Clock::now());  // in the set-up lines
  }
  if (options_.objective == TrainObjective::Grpo && options_.grpo_beta() > 0) {
    const MemoryPhase phase("reference");
    grpo_reference_.emplace(frozen_reference(*model_));  // before a resumed run restores its checkpoint
  }
}

void Trainer::restore_checkpoint() {
  const fs::path& dir = resume_->checkpoint.dir;
  std::vector<Parameter> masters;
  for (const NamedTensor& master : model_->master_weights()) masters.push_back({master.name, master.tensor, {}, false});
  // latest_checkpoint() verified the checksums a moment ago.
  const json state = load_checkpoint(dir, masters, *optimizer_, VerifyLevel::Sizes,
                                     comm_->size() > 1 ? OptimizerScope::Shard : OptimizerScope::Whole);
  model_->refresh_quantized();
  const std::string where = (dir / kTrainerStateFileName).string();
  NVFP4LM_CHECK(state.contains("data_position"), "{}: \"data_position\" is missing", where);
  data_.loader->restore(state["data_position"]);
  step_ = state["step"].get<int64_t>();
  totals_ = RunTotals::from_state(state, where);
  if (state.contains("calibration"))
    calibration_ = ActivationCalibration::from_json(state["calibration"], where + " \"calibration\"");
  const int64_t saved_total =
      json_field_or(json_field_or(state, "totals", json::object(), where), "total_steps", plan_.total_steps, where);
  if (saved_total != plan_.total_steps)
    log::warn("the run now has {} steps (it had {}); the LR schedule is stretched to the new length", plan_.total_steps,
              saved_total);
  NVFP4LM_CHECK(step_ <= plan_.total_steps,
                "--resume: the checkpoint is at step {} but the run has only {} steps; raise --max-steps or --epochs",
                step_, plan_.total_steps);
  resumed_from_ = step_;
}

// ---- one step -------------------------------------------------------------------------------------------------

StepMetrics Trainer::train_step() {
  NVFP4LM_CHECK(!done(), "the run is complete ({} of {} steps)", step_, plan_.total_steps);
  const Clock::time_point start = Clock::now();
  if (!session_.start) session_.start = start;

  StepMetrics m;
  m.step = step_ + 1;
  m.total_steps = plan_.total_steps;
  std::vector<TrainBatch> micro_batches;
  const bool preference = options_.objective == TrainObjective::Dpo;
  int64_t pairs = 0;
  const std::vector<TokenBatch> batches = step_batches(plan_, *data_.loader, step_);
  if (options_.objective == TrainObjective::Grpo) {
    micro_batches = grpo_micro_batches(batches, m);
  } else {
    for (const TokenBatch& batch : batches) {
      m.loss_tokens += batch.tokens_in_batch;
      m.input_tokens += batch.rows() * batch.row_tokens() - batch.padding_tokens;
      micro_batches.push_back({batch.ids, batch.targets, batch.positions, batch.segment_ids, {}});
      if (preference) {  // one completion a row: the rows' samples in order
        for (int64_t index : batch.sample_indices)
          micro_batches.back().reference_logps.push_back(data_.reference_logps[static_cast<size_t>(index)]);
        pairs += batch.rows() / 2;
      }
      // LoRA dropout: a mask per step and micro-batch, from the run's seed (a resumed run draws the same ones).
      micro_batches.back().dropout_seed =
          mix64(options_.seed ^ mix64((static_cast<uint64_t>(step_) << 20) + micro_batches.size()));
      // Data parallel: the teacher only for the micro-batches this rank computes.
      if (!data_parallel_ || data_parallel_->computes(micro_batches.size() - 1))
        attach_teacher_top_k(teacher_ ? &*teacher_ : nullptr, micro_batches.back());
    }
  }
  m.micro_batches = static_cast<int>(micro_batches.size());
  NVFP4LM_ASSERT(m.micro_batches >= 1, "step {} has no micro-batches", m.step);
  // Every sample carries a trained token (dataset.h), so a batch always does.
  NVFP4LM_ASSERT(m.loss_tokens > 0, "step {}: no trained tokens in its batches", m.step);

  model_->zero_grad();
  m.lr = lr_at(schedule_, step_);
  // --calibrate-steps: this step's forward passes record activation ranges (not the evaluation's below), on every
  // rank its own micro-batches'; the step's ranges are then merged across the ranks (add_step_calibration).
  ActivationCalibration step_calibration;
  const bool calibrates = options_.calibrate_steps > 0 && step_ >= plan_.total_steps - options_.calibrate_steps;
  if (calibrates) {
    if (calibration_.source.empty())
      calibration_.source = fmt::format("train --calibrate-steps {} (from step {})", options_.calibrate_steps, m.step);
    model_->set_calibration(&step_calibration);
  }
  StepSettings settings;
  // The mean loss over the step's trained tokens, or over its pairs for a preference objective (TRL's mean).
  settings.grad_scale = static_cast<float>(1.0 / static_cast<double>(preference ? pairs : m.loss_tokens));
  settings.loss = training_loss(options_, teacher_ ? &*teacher_ : nullptr);
  settings.lr = m.lr;
  settings.max_grad_norm = options_.max_grad_norm;
  StepResult result;
  const Clock::time_point train_start = Clock::now();
  try {
    result = take_train_step(*model_, *optimizer_, micro_batches, settings, {}, data_parallel_.get());
  } catch (...) {
    model_->set_calibration(nullptr);
    throw;
  }
  model_->set_calibration(nullptr);
  if (calibrates) add_step_calibration(step_calibration);
  NVFP4LM_ASSERT(result.stats.tokens == m.loss_tokens, "step {}: the model counted {} trained tokens, the batches {}",
                 m.step, result.stats.tokens, m.loss_tokens);
  m.loss = result.stats.loss_sum / static_cast<double>(preference ? pairs : m.loss_tokens);
  if (preference) {
    NVFP4LM_ASSERT(result.stats.pairs == pairs, "step {}: the model counted {} pairs, the batches {}", m.step,
                   result.stats.pairs, pairs);
    m.preference = preference_metrics(result.stats);
  }
  m.token_accuracy = static_cast<double>(result.stats.correct) / static_cast<double>(m.loss_tokens);
  if (teacher_) {
    m.kl = result.stats.mean_kl();
    m.agreement = static_cast<double>(result.stats.agree) / static_cast<double>(m.loss_tokens);
  }
  if (m.grpo) {
    m.grpo->train_seconds = seconds_between(train_start, Clock::now());
    m.grpo->train_tokens_per_second =
        m.grpo->train_seconds > 0 ? static_cast<double>(m.input_tokens) / m.grpo->train_seconds : 0;
    m.grpo->clip_ratio = static_cast<double>(result.stats.clipped) / static_cast<double>(m.loss_tokens);
    if (grpo_reference_) m.grpo->kl = result.stats.mean_kl();
  }
  m.grad_norm = result.grad_norm;
  if (!result.applied) {
    apply_nonfinite_policy(m, !std::isfinite(m.loss) ? "non-finite loss" : "non-finite gradient norm",
                           /*partly_applied=*/false);
  } else if (!result.skipped_groups.empty()) {
    apply_nonfinite_policy(m,
                           fmt::format("non-finite gradient in {} parameter group(s) (first: {}), which kept their "
                                       "weights",
                                       result.skipped_groups.size(), result.skipped_groups.front()),
                           /*partly_applied=*/true);
  } else {
    m.clip_coefficient = result.clip_coefficient;
  }
  ++step_;

  const Clock::time_point end = Clock::now();
  ++session_.steps;
  session_.loss_tokens += m.loss_tokens;
  session_.input_tokens += m.input_tokens;
  const DataLoader& loader = *data_.loader;
  m.epoch = static_cast<double>(loader.epoch()) +
            static_cast<double>(loader.next_sample()) / static_cast<double>(loader.samples().size());
  m.step_seconds = seconds_between(start, end);
  m.tokens_per_second = m.step_seconds > 0 ? static_cast<double>(m.input_tokens) / m.step_seconds : 0;
  m.elapsed_seconds = seconds_between(*session_.start, end);
  m.eta_seconds =
      m.elapsed_seconds / static_cast<double>(session_.steps) * static_cast<double>(plan_.total_steps - step_);
  const MemoryTracker& tracker = MemoryTracker::instance();
  m.device_bytes = tracker.current_bytes(device_);
  m.device_peak_bytes = tracker.peak_bytes(device_);
  m.rss_bytes = current_rss_bytes();
  if (evaluates_at(step_)) m.eval = evaluate();
  totals_.record(m);
  if (run_dir_) run_dir_->metrics().append(m);
  return m;
}

void Trainer::apply_nonfinite_policy(StepMetrics& m, const std::string& reason, bool partly_applied) const {
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
  log::warn("step {}: {} (loss {}, gradient norm {}); step skipped, no update made (--nonfinite skip)", m.step, reason,
            m.loss, m.grad_norm);
}

void Trainer::add_step_calibration(const ActivationCalibration& step) {
  // The largest |x| over every rank's micro-batches and the sum of their tokens: a max and an integer sum, exact
  // whatever the order, so N ranks record what one process records.
  auto add = [&](const ActivationCalibration& rank) {
    for (const auto& [name, amax] : rank.input_amax) calibration_.observe(name, amax);
    calibration_.tokens += rank.tokens;
  };
  if (comm_->size() == 1) return add(step);
  for (const std::string& text : all_gather_strings(*comm_, step.to_json().dump()))
    add(ActivationCalibration::from_json(json::parse(text), "a rank's activation ranges"));
}

// ---- evaluation -----------------------------------------------------------------------------------------------

bool Trainer::evaluates_at(int64_t step) const {
  return options_.has_eval() &&
         (step == plan_.total_steps || (options_.eval_every > 0 && step % options_.eval_every == 0));
}

Trainer::Scored Trainer::sample_and_score(const std::vector<const Sample*>& prompts,
                                          const std::vector<const nlohmann::json*>& records, int64_t seed_step) {
  NVFP4LM_CHECK(rollouts_, "--objective grpo: the trainer has no rollout engine (internal: the train command sets it)");
  const int64_t group = options_.num_generations;
  std::vector<std::vector<int32_t>> prompt_ids;
  std::vector<uint64_t> seeds;
  std::vector<const nlohmann::json*> completion_records;
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (int64_t g = 0; g < group; ++g) {
      seeds.push_back(rollout_seed(options_.seed, seed_step, static_cast<int64_t>(prompt_ids.size())));
      prompt_ids.push_back(prompts[p]->ids);
      completion_records.push_back(records[p]);
    }
  }
  Scored out;
  const Clock::time_point start = Clock::now();
  {
    const MemoryPhase phase("rollout");
    out.completions = rollouts_(*model_, prompt_ids, seeds);
  }
  NVFP4LM_ASSERT(out.completions.size() == prompt_ids.size(), "{} completions for {} prompts", out.completions.size(),
                 prompt_ids.size());
  const Clock::time_point sampled = Clock::now();
  out.rollout_seconds = seconds_between(start, sampled);
  std::vector<const Completion*> pointers;
  for (const Completion& c : out.completions) pointers.push_back(&c);
  RewardSpec spec = parse_reward_spec(options_.reward);
  spec.timeout_seconds = options_.reward_timeout;
  out.rewards = score_completions(spec, completion_records, pointers);
  out.score_seconds = seconds_between(sampled, Clock::now());
  return out;
}

namespace {

GrpoMetrics grpo_metrics(const std::vector<Completion>& completions, const std::vector<double>& rewards,
                         double rollout_seconds, double score_seconds) {
  GrpoMetrics g;
  g.completions = static_cast<int64_t>(completions.size());
  const auto n = static_cast<double>(std::max<size_t>(completions.size(), 1));
  int64_t tokens = 0, ended = 0;
  bool measured = !completions.empty();
  double entropy_sum = 0;
  for (const Completion& c : completions) {
    tokens += static_cast<int64_t>(c.tokens.size());
    ended += c.ended ? 1 : 0;
    measured = measured && c.entropy_sum.has_value();
    entropy_sum += c.entropy_sum.value_or(0);
  }
  if (measured) g.entropy = tokens > 0 ? entropy_sum / static_cast<double>(tokens) : 0;
  for (double r : rewards) g.reward += r / n;
  for (double r : rewards) g.reward_std += (r - g.reward) * (r - g.reward) / n;
  g.reward_std = std::sqrt(g.reward_std);
  g.completion_length = static_cast<double>(tokens) / n;
  g.ended = static_cast<double>(ended) / n;
  g.rollout_seconds = rollout_seconds;
  g.rollout_tokens_per_second = rollout_seconds > 0 ? static_cast<double>(tokens) / rollout_seconds : 0;
  g.score_seconds = score_seconds;
  return g;
}

}  // namespace

std::vector<TrainBatch> Trainer::grpo_micro_batches(const std::vector<TokenBatch>& batches, StepMetrics& m) {
  const std::vector<Sample>& samples = data_.loader->samples();
  std::vector<const Sample*> prompts;
  std::vector<const nlohmann::json*> records;
  for (const TokenBatch& batch : batches) {
    for (int64_t index : batch.sample_indices) {
      prompts.push_back(&samples[static_cast<size_t>(index)]);
      records.push_back(&data_.prompt_records[static_cast<size_t>(index)]);
    }
  }
  const Scored scored = sample_and_score(prompts, records, step_);
  const int64_t group = options_.num_generations;
  const std::vector<float> advantages = group_advantages(scored.rewards, group);
  std::vector<TrainBatch> micro_batches;
  size_t first = 0;  // the batch's first completion
  const int32_t pad = data_.loader->options().pad_id;
  for (const TokenBatch& batch : batches) {
    const size_t count = static_cast<size_t>(batch.rows() * group);
    std::vector<const std::vector<int32_t>*> row_prompts;
    std::vector<const Completion*> row_completions;
    for (size_t c = first; c < first + count; ++c) {
      row_prompts.push_back(&prompts[c / static_cast<size_t>(group)]->ids);
      row_completions.push_back(&scored.completions[c]);
      m.input_tokens += static_cast<int64_t>(row_prompts.back()->size() + row_completions.back()->tokens.size());
    }
    micro_batches.push_back(
        completion_batch(row_prompts, row_completions,
                         std::vector<float>(advantages.begin() + static_cast<std::ptrdiff_t>(first),
                                            advantages.begin() + static_cast<std::ptrdiff_t>(first + count)),
                         pad));
    if (grpo_reference_) {
      const MemoryPhase phase("reference");
      micro_batches.back().ref_logps =
          reference_token_logps(*grpo_reference_, row_prompts, row_completions, micro_batches.back().ids.dim(1));
    }
    m.loss_tokens += count_loss_tokens(micro_batches.back());
    first += count;
  }
  m.grpo = grpo_metrics(scored.completions, scored.rewards, scored.rollout_seconds, scored.score_seconds);
  return micro_batches;
}

EvalMetrics Trainer::evaluate() {
  if (options_.objective == TrainObjective::Grpo) {
    NVFP4LM_CHECK(!data_.eval_prompts.empty(), "no evaluation prompts (--eval-data FILE or --eval-split F)");
    const MemoryPhase phase("evaluate");
    std::vector<const Sample*> prompts;
    std::vector<const nlohmann::json*> records;
    for (size_t i = 0; i < data_.eval_prompts.size(); ++i) {
      prompts.push_back(&data_.eval_prompts[i]);
      records.push_back(&data_.eval_prompt_records[i]);
    }
    // The same seeds at every evaluation (a step number no training step has), so evaluations compare.
    const Scored scored = sample_and_score(prompts, records, -1);
    EvalMetrics eval;
    eval.grpo = grpo_metrics(scored.completions, scored.rewards, scored.rollout_seconds, scored.score_seconds);
    eval.loss = -eval.grpo->reward;
    for (const Completion& c : scored.completions) eval.tokens += static_cast<int64_t>(c.tokens.size());
    eval.seconds = scored.rollout_seconds + scored.score_seconds;
    return eval;
  }
  NVFP4LM_CHECK(!data_.eval.batches.empty(), "no evaluation data (--eval-data FILE or --eval-split F)");
  const Clock::time_point start = Clock::now();
  const MemoryPhase phase("evaluate");
  const TrainLoss loss = training_loss(options_, teacher_ ? &*teacher_ : nullptr);
  LossStats total;
  if (data_parallel_) {  // batch i on rank i mod N, the statistics added in batch order (one process's sums)
    total = data_parallel_->sum_dealt(data_.eval.batches.size(),
                                      [&](size_t i) { return model_->evaluate(data_.eval.batches[i], loss); });
  } else {
    for (const TrainBatch& batch : data_.eval.batches) total += model_->evaluate(batch, loss);
  }
  EvalMetrics eval;
  eval.tokens = total.tokens;
  eval.loss = total.mean();
  if (options_.objective == TrainObjective::Dpo) {
    eval.loss = total.loss_sum / static_cast<double>(std::max<int64_t>(total.pairs, 1));
    eval.preference = preference_metrics(total);
  }
  eval.perplexity = std::exp(eval.loss);
  eval.token_accuracy = total.tokens > 0 ? static_cast<double>(total.correct) / static_cast<double>(total.tokens) : 0;
  if (teacher_) {
    eval.kl = total.mean_kl();
    eval.agreement = total.tokens > 0 ? static_cast<double>(total.agree) / static_cast<double>(total.tokens) : 0;
  }
  eval.seconds = seconds_between(start, Clock::now());
  return eval;
}

// ---- checkpoints and export -----------------------------------------------------------------------------------

json Trainer::trainer_state() const {
  json state = {{"config", train_options_to_json(options_)},
                {"epoch", data_.loader->epoch()},
                {"data_position", data_.loader->state()},
                {"rng", json::object()},
                {"seeds", {{"data_order", options_.seed}, {"stochastic_rounding", options_.seed}}},
                {"model",
                 {{"config", source_.config},
                  {"generation_config", source_.generation_config ? *source_.generation_config : json(nullptr)},
                  {"source", options_.model.empty() ? std::string() : real_path(options_.model).string()}}},
                {"totals", totals_.totals_json(plan_.total_steps)},
                {"metrics", totals_.metrics_json()}};
  if (!calibration_.empty()) state["calibration"] = calibration_.to_json();
  return state;
}

fs::path Trainer::save_checkpoint() {
  const MemoryPhase phase("checkpoint");
  std::optional<int64_t> best;
  if (options_.save_best && totals_.best_eval_step > 0) best = totals_.best_eval_step;
  // N ranks: the shards' optimizer state on rank 0, which writes what one process writes.
  const std::vector<NamedTensor> state =
      comm_->size() > 1 ? gather_state_on_rank0(*comm_, optimizer_->state_tensors()) : optimizer_->state_tensors();
  if (!run_dir_) return checkpoint_dir(options_.output, step_);
  return run_dir_->save_checkpoint(step_, model_->master_weights(), state, optimizer_->describe(), trainer_state(),
                                   options_.keep, best);
}

ExportSource Trainer::export_source() const {
  ExportSource source;
  source.config_json = source_.config;
  source.generation_config = source_.generation_config;
  source.side_files = tokenizer_side_files(run_dir_->source_model_dir(source_.tokenizer_dir));
  // An --overwrite export replaces OUT as a whole: it must not hold the model, tokenizer or data it was trained
  // from, nor the run's own files.
  source.protected_paths = run_dir_->protected_paths(read_paths());
  if (!options_.metrics.empty()) source.protected_paths.push_back({options_.metrics, "the --metrics file"});
  if (!options_.memory_report.empty())
    source.protected_paths.push_back({options_.memory_report, "the --memory-report file"});
  return source;
}

std::vector<GuardedInput> Trainer::read_paths() const {
  std::vector<GuardedInput> inputs;
  if (!options_.model.empty()) inputs.push_back({options_.model, "the model (--model)"});
  if (!options_.data.empty()) inputs.push_back({options_.data, "the training data (--data)"});
  if (!options_.eval_data.empty()) inputs.push_back({options_.eval_data, "the evaluation data (--eval-data)"});
  if (!options_.tokenizer.empty()) inputs.push_back({options_.tokenizer, "the tokenizer (--tokenizer)"});
  if (!options_.distill_from.empty()) inputs.push_back({options_.distill_from, "the teacher (--distill-from)"});
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
  if (!calibration_.empty() && format_capabilities(options_.export_format).activation_scales)
    export_options.calibration = calibration_;
  const std::vector<NamedTensor> masters = model_->master_weights();
  if (options_.lora_rank > 0)
    return export_lora_adapter(masters, options_, files_->config(), export_source(), options_.export_path,
                               options_.overwrite);
  if (!options_.output_dat.empty()) {
    export_options.format = ModelFormat::Dat;
    return export_dat_file(masters, export_source(), options_.output_dat, export_options);
  }
  return export_weights(masters, export_source(), options_.export_path, export_options);
}

// ---- the run --------------------------------------------------------------------------------------------------

json Trainer::ranks_memory() const {
  // Every rank's own figures (each rank is a process of its own: the tracker and the RSS are per process).
  const json report = memory_report_json(device_);
  const json mine = {{"rank", comm_->rank()},
                     {"optimizer_state_bytes", optimizer_->state_bytes()},
                     {"device_peak_bytes", report["device_peak_bytes"]},
                     {"host_peak_rss_bytes", report["host_peak_rss_bytes"]}};
  json ranks = json::array();
  for (const std::string& text : all_gather_strings(*comm_, mine.dump())) ranks.push_back(json::parse(text));
  return ranks;
}

TrainSummary Trainer::run(const Progress& progress) {
  auto before_output = [&] {
    if (progress.before_output) progress.before_output();
  };
  const int64_t start_step = step_;
  const int64_t skipped_before = totals_.skipped_steps;
  if (done()) {
    before_output();
    log::info("the run is already complete ({} of {} steps); nothing to train", step_, plan_.total_steps);
  }
  std::optional<int64_t> saved_step = resumed_from_;
  try {
    while (!done()) {
      check_memory_guard();
      const StepMetrics metrics = train_step();
      if (progress.on_step) progress.on_step(metrics);
      const bool new_best = options_.save_best && metrics.eval && metrics.eval->best;
      if (((options_.save_every > 0 && step_ % options_.save_every == 0) || new_best) && !done()) {
        before_output();
        save_checkpoint();
        saved_step = step_;
      }
    }
  } catch (const Error&) {
    if (!memory_guard_tripped()) throw;
    before_output();
    // Stopped the way any failure stops a run; what the user needs next is where it can continue from.
    NVFP4LM_FAIL(
        "{}; {}", memory_guard_message(),
        saved_step ? fmt::format("the last checkpoint, step {}, is kept: add --resume to continue from it", *saved_step)
                   : std::string("no checkpoint had been saved yet (--save-every N saves one every N steps)"));
  }
  before_output();
  // --nonfinite skip keeps a run going past a bad step; a run that skipped every step trained nothing, and its
  // outputs (a checkpoint, an export, exit 0) would say otherwise.
  const int64_t ran = step_ - start_step, skipped = totals_.skipped_steps - skipped_before;
  NVFP4LM_CHECK(ran == 0 || skipped < ran,
                "every step of this run ({} of {}) was skipped for a non-finite loss or gradient (--nonfinite skip): "
                "nothing was trained, so nothing more is saved or exported; the log names each step's reason (a "
                "damaged model or teacher cache, a learning rate too high, broken data)",
                skipped, ran);
  if (saved_step != step_) save_checkpoint();

  TrainSummary summary;
  summary.start_step = start_step;
  // N ranks: their figures gathered before rank 0 exports, so that no rank waits in a collective for the export.
  const json ranks = comm_->size() > 1 ? ranks_memory() : json();
  if (run_dir_ && (!options_.export_path.empty() || !options_.output_dat.empty()))
    summary.export_report = export_model();
  json memory = memory_report_json(device_);
  memory["optimizer_state_bytes"] = optimizer_->state_bytes();
  if (!ranks.is_null()) memory["ranks"] = ranks;
  summary.memory_text = format_memory_report(memory);
  if (!run_dir_) {  // another rank: the outputs are rank 0's
    summary.steps = step_;
    summary.total_steps = plan_.total_steps;
    return summary;
  }
  if (run_dir_->memory_report_path()) {
    run_dir_->write_memory_report(memory);
    summary.memory_report_path = run_dir_->memory_report_path();
  }
  summary.steps = step_;
  summary.total_steps = plan_.total_steps;
  summary.skipped_steps = totals_.skipped_steps;
  summary.loss_tokens = session_.loss_tokens;
  summary.input_tokens = session_.input_tokens;
  summary.seconds = session_.start ? seconds_since(*session_.start) : 0;
  summary.final_loss = totals_.last_loss;
  summary.best_loss = totals_.best_loss;
  summary.best_step = totals_.best_step;
  summary.best_eval_loss = totals_.best_eval_loss;
  summary.best_eval_step = totals_.best_eval_step;
  summary.objective_loss = options_.objective != TrainObjective::Sft;
  if (options_.save_best && totals_.best_eval_step > 0) {
    std::error_code ec;
    if (fs::is_directory(checkpoint_dir(options_.output, totals_.best_eval_step), ec))
      summary.best_checkpoint = checkpoint_dir(options_.output, totals_.best_eval_step);
  }
  summary.checkpoints = run_dir_->newest_checkpoints(step_, options_.keep);
  summary.metrics_path = run_dir_->metrics().path();
  return summary;
}

}  // namespace nvfp4lm
