// See parity.h. The paths run one after another, each loading its model (consecutive paths on one model share
// it), running every prompt's sequence and comparing with the path it is judged against as soon as both exist.
#include "tools/parity.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>

#include "core/error.h"
#include "core/logging.h"
#include "core/stopwatch.h"
#include "infer/stop_conditions.h"
#include "io/model_copy.h"
#include "model/qwen3_model.h"
#include "model/qwen3_trainable.h"
#include "ops/cross_entropy.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"
#include "tools/kept_logits.h"
#include "tools/parity_baseline.h"
#include "tools/teacher_forced.h"
#include "train/export.h"
#include "train/train_options.h"

namespace nvfp4lm {
namespace {

// Which model a path runs: the files it is opened from, the device, whether NVFP4 weights are dequantized, and the
// CPU's kernels.
struct ModelKey {
  fs::path path;
  OpenModelOptions open;
  Device device = Device::cpu();
  bool dense = false;
  CpuMatmul cpu_matmul = CpuMatmul::Fp32;
  bool operator==(const ModelKey& other) const {
    return path == other.path && device == other.device && dense == other.dense && cpu_matmul == other.cpu_matmul;
  }
};

// What runs a path: the inference engine (Qwen3Model), or the training model (Qwen3Trainable) whose masters are
// exported first (train-export) or whose QAT forward gives the logits (train-forward, train-cuda).
enum class PathKind { Inference, TrainExport, TrainForward };

struct PathSpec {
  ParityPath info;
  PathKind kind = PathKind::Inference;
  ModelKey model;
  SequenceRunner runner = SequenceRunner::Full;
  std::optional<ModelFormat> copy;  // written to the scratch directory first
  bool copied = false;              // ... and it has been
  std::string against;              // "" for the reference
  ToleranceClass tolerance_class = ToleranceClass::Fp32;
};

bool has_nvfp4_weights(const ModelFiles& files) {
  return std::any_of(files.weights().begin(), files.weights().end(),
                     [](const WeightInfo& info) { return info.kind && info.nvfp4; });
}

// A W4A4 checkpoint (input_scale on its NVFP4 weights): every path runs it W4A4 (ModelOptions::w4a4_activations).
bool is_w4a4_checkpoint(const ModelFiles& files) {
  for (const WeightInfo& info : files.weights()) {
    if (!info.kind || !info.nvfp4) continue;
    const float input_scale = files.load(info.name).input_scale;
    files.release(info.name);
    if (input_scale > 0) return true;
  }
  return false;
}

// The paths of parity.h, in order, with the reasons for those that cannot run.
std::vector<PathSpec> plan_paths(const ParityOptions& options, const ModelFiles& files) {
  const bool nvfp4 = has_nvfp4_weights(files);
  const ModelKey main{options.model, options.open, Device::cpu(), false};
  std::vector<PathSpec> paths;
  auto add = [&](std::string name, std::string description, ModelKey model, SequenceRunner runner, std::string against,
                 ToleranceClass tolerance_class) -> PathSpec& {
    PathSpec& spec = paths.emplace_back();
    spec.info.name = std::move(name);
    spec.info.description = std::move(description);
    spec.info.device = model.device.label();
    spec.model = std::move(model);
    spec.runner = runner;
    spec.against = std::move(against);
    spec.tolerance_class = tolerance_class;
    return spec;
  };
  add("reference", "the model as given, full forward", main, SequenceRunner::Full, "", ToleranceClass::Fp32);
  add("cpu-cache", "KV cache: the prompt prefilled, then one token per step", main, SequenceRunner::Cached, "reference",
      ToleranceClass::Fp32);
  ModelKey dense = main;
  dense.dense = true;
  PathSpec& cpu_dense = add("cpu-dense", "NVFP4 weights dequantized once to F32, full forward", dense,
                            SequenceRunner::Full, "reference", ToleranceClass::Fp32);
  if (!nvfp4) cpu_dense.info.skipped = "the model's weights are dense: the reference already runs cpu/dense";
  // The CPU's fast paths: BF16 activations in the prefill's products; and generate's default, int8 activations in
  // the decode steps' NVFP4 products besides. KV cache as generate runs.
  ModelKey bf16 = main;
  bf16.cpu_matmul = CpuMatmul::Bf16Activations;
  add("cpu-bf16", "KV cache, BF16 activations in the prefill's products (cpu/nvfp4-bf16)", bf16, SequenceRunner::Cached,
      "reference", ToleranceClass::Bf16Activations);
  ModelKey int8 = main;
  int8.cpu_matmul = CpuMatmul::Int8Activations;
  add("cpu-int8",
      "KV cache, int8 activations in the decode steps' NVFP4 products, BF16 in the prefill's (cpu/nvfp4-int8, "
      "generate's default)",
      int8, SequenceRunner::Cached, "reference", ToleranceClass::Int8Activations);

  // compressed-tensors stores tensor scales as reciprocals: identical unless one is no float's reciprocal, which then
  // moves by one ulp (io/compressed_tensors.h), a float32 rounding difference.
  const bool compressed_exact = scales_moved_by_copy(files, ModelFormat::CompressedTensorsNvfp4) == 0;
  const std::map<ModelFormat, std::pair<std::string, ToleranceClass>> copies = {
      {ModelFormat::ModeloptNvfp4, {"reference", ToleranceClass::Identical}},
      {ModelFormat::CompressedTensorsNvfp4,
       {"copy-modelopt", compressed_exact ? ToleranceClass::Identical : ToleranceClass::Fp32}},
      {ModelFormat::Dat, {"copy-modelopt", ToleranceClass::Identical}},
      {ModelFormat::HfSafetensors, {"reference", ToleranceClass::Bf16Weights}}};
  for (const ModelFormat format : {ModelFormat::ModeloptNvfp4, ModelFormat::CompressedTensorsNvfp4, ModelFormat::Dat,
                                   ModelFormat::HfSafetensors}) {
    const std::string name = "copy-" + std::string(export_format_flag_name(format));
    const std::string what =
        format == ModelFormat::HfSafetensors ? "dense BF16 safetensors" : std::string(model_format_name(format));
    // The copy's subdirectory of the scratch directory (written when the path runs).
    const ModelKey key{fs::path(export_format_flag_name(format)), {}, Device::cpu(), false};
    PathSpec& copy = add(name, fmt::format("the model written as {} to a temporary directory, full forward", what), key,
                         SequenceRunner::Full, copies.at(format).first, copies.at(format).second);
    copy.copy = format;
    if (const std::string obstacle = copy_obstacle(files, format); !obstacle.empty())
      copy.info.skipped = "cannot be written unchanged: " + obstacle;
  }

  const std::string no_cuda = options.cuda ? "" : "no CUDA device: " + options.no_cuda_reason;
  const Device cuda_device = options.cuda.value_or(Device::cuda(0));
  // CUDA against the CPU: bf16 activations, which W4A4 then quantizes (logit_diff.h, w4a4-activations).
  const ToleranceClass cuda_vs_cpu =
      is_w4a4_checkpoint(files) ? ToleranceClass::W4a4Activations : ToleranceClass::Bf16Activations;
  ModelKey on_cuda = main;
  on_cuda.device = cuda_device;
  add("cuda", "full forward", on_cuda, SequenceRunner::Full, "reference", cuda_vs_cpu).info.skipped = no_cuda;
  add("cuda-eager", "KV cache, decode steps op by op", on_cuda, SequenceRunner::CachedEager, "cuda",
      ToleranceClass::Bf16Activations)
      .info.skipped = no_cuda;
  add("cuda-graph", "KV cache, decode steps replayed as one CUDA graph", on_cuda, SequenceRunner::CachedGraph,
      "cuda-eager", ToleranceClass::Identical)
      .info.skipped = no_cuda;
  ModelKey cuda_dense = on_cuda;
  cuda_dense.dense = true;
  PathSpec& dense_cuda = add("cuda-dense", "NVFP4 weights dequantized once to BF16, full forward", cuda_dense,
                             SequenceRunner::Full, "cpu-dense", cuda_vs_cpu);
  dense_cuda.info.skipped = !no_cuda.empty() ? no_cuda
                            : nvfp4          ? ""
                                             : "the model's weights are dense: the cuda path already runs them dense";
  const std::string no_train = options.train_forward ? "" : "--train-forward off";
  ModelKey export_key{fs::path("train-export"), {}, Device::cpu(), false};
  PathSpec& train_export =
      add("train-export",
          "the model as train starts from it, exported as train --export writes it (ModelOpt, QAT's tensor scales), "
          "full forward",
          export_key, SequenceRunner::Full, nvfp4 ? "reference" : "", ToleranceClass::Requantized);
  train_export.kind = PathKind::TrainExport;
  train_export.info.skipped = no_train;
  ModelKey train_key = main;
  PathSpec& train_forward = add("train-forward", "the QAT (w4a16) forward training computes, full forward", train_key,
                                SequenceRunner::Full, "train-export", ToleranceClass::Fp32);
  train_forward.kind = PathKind::TrainForward;
  train_forward.info.skipped = no_train;
  train_key.device = cuda_device;
  PathSpec& train_cuda = add("train-cuda", "the QAT (w4a16) forward training computes on CUDA, full forward", train_key,
                             SequenceRunner::Full, "train-forward", ToleranceClass::Bf16Activations);
  train_cuda.kind = PathKind::TrainForward;
  train_cuda.info.skipped = !no_train.empty() ? no_train : no_cuda;
  if (options.other) {
    add("other", "--other " + options.other->string() + ", full forward",
        ModelKey{*options.other, {}, Device::cpu(), false}, SequenceRunner::Full, "reference", ToleranceClass::Other);
  }
  for (PathSpec& spec : paths) {
    const auto against =
        std::find_if(paths.begin(), paths.end(), [&](const PathSpec& p) { return p.info.name == spec.against; });
    if (spec.info.skipped.empty() && against != paths.end() && !against->info.skipped.empty())
      spec.info.skipped = spec.against + " did not run, and it is judged against it";
  }
  return paths;
}

// The prompt's ids (rendered as generation renders it) plus the reference's greedy continuation.
ParityPrompt make_sequence(const Qwen3Model& reference, const Tokenizer& tokenizer, const std::string& text,
                           int64_t new_tokens, int64_t candidates, const std::vector<int32_t>& eos, size_t index) {
  ParityPrompt prompt;
  prompt.text = text;
  const std::vector<ChatMessage> messages = {{"user", text}};
  prompt.ids = encode_generation_prompt(tokenizer, ChatTemplate::resolve(tokenizer), messages, false);
  prompt.prompt_tokens = static_cast<int64_t>(prompt.ids.size());
  // Refused before any forward: a sequence past the context cannot be compared (and ran for many minutes first).
  const int64_t context = reference.config().max_position_embeddings;
  NVFP4LM_CHECK(prompt.prompt_tokens <= context - new_tokens,
                "parity: prompt {} has {} tokens (chat template included) and --new-tokens {} more, but the model's "
                "context (max_position_embeddings) is {}: shorten the prompt or lower --new-tokens",
                index + 1, prompt.prompt_tokens, new_tokens, context);
  for (int64_t step = 0; step < new_tokens; ++step) {
    const int64_t tokens = static_cast<int64_t>(prompt.ids.size());
    const Tensor logits = reference.forward_last(Tensor::from_ints(prompt.ids, Shape{1, tokens}), 1);
    const float* row = logits.data<float>();
    NVFP4LM_CHECK(std::all_of(row, row + logits.numel(), [](float x) { return std::isfinite(x); }),
                  "parity: the reference path ({} on the CPU) gives a NaN or inf logit at position {} of prompt {}: "
                  "the model's weights are broken",
                  reference.source().string(), tokens - 1, index + 1);
    const auto next = static_cast<int32_t>(std::max_element(row, row + candidates) - row);
    prompt.ids.push_back(next);
    if (std::binary_search(eos.begin(), eos.end(), next)) break;
  }
  return prompt;
}

// The training model as `train` builds it by default (QAT w4a16, 1x16 blocks, lm_head unquantized) on `device`.
TrainModelOptions training_options(Device device) {
  TrainModelOptions options;
  options.qat = QatMode::W4A16;
  options.device = device;
  return options;
}

// What `train --export` writes before any step: the masters of the model as training loads it, quantized with QAT's
// group tensor scales, as ModelOpt NVFP4 (weight-only).
void export_training_start(const ModelFiles& files, const fs::path& out) {
  const Qwen3Trainable trainable = Qwen3Trainable::from_files(files, training_options(Device::cpu()));
  ExportSource source;
  source.config_json = files.config_json();
  export_weights(trainable.master_weights(), source, out, ExportOptions{});
}

// The QAT forward's logits of `ids` (one row of T tokens, nothing trained on), F32 [T, V] on the CPU.
Tensor training_logits(Qwen3Trainable& trainable, const std::vector<int32_t>& ids) {
  const auto tokens = static_cast<int64_t>(ids.size());
  TrainBatch batch;
  batch.ids = Tensor::from_ints(ids, Shape{1, tokens});
  batch.targets = Tensor::from_ints(std::vector<int32_t>(ids.size(), kIgnoreIndex), Shape{1, tokens});
  return trainable.logits(batch).to(Device::cpu());
}

// The position in `paths` of the path a failure line names (its first word).
size_t failure_path_rank(const std::vector<PathSpec>& paths, const std::string& failure) {
  const std::string name = failure.substr(0, failure.find(' '));
  const auto it = std::find_if(paths.begin(), paths.end(), [&](const PathSpec& p) { return p.info.name == name; });
  return static_cast<size_t>(it - paths.begin());
}

std::string decode_one(const Tokenizer& tokenizer, int32_t id) {
  const int32_t ids[1] = {id};
  return tokenizer.decode(ids);
}

}  // namespace

std::vector<std::string> default_parity_prompts() {
  return {"Who are you? Answer in one sentence.", "請用一句話介紹你自己。"};
}

std::vector<ParityPromptGroup> parity_prompt_groups(const std::vector<int64_t>& prompt_tokens, int64_t vocab,
                                                    int64_t max_logit_bytes) {
  std::vector<ParityPromptGroup> groups;
  int64_t bytes = 0;
  for (size_t p = 0; p < prompt_tokens.size(); ++p) {
    const int64_t prompt_bytes = prompt_tokens[p] * vocab * static_cast<int64_t>(sizeof(float));
    if (groups.empty() || bytes + prompt_bytes > max_logit_bytes) {
      groups.push_back({p, p});
      bytes = 0;
    }
    groups.back().end = p + 1;
    bytes += prompt_bytes;
  }
  return groups;
}

ParityReport run_parity(const ParityOptions& options) {
  NVFP4LM_CHECK(options.new_tokens >= 1, "parity: --new-tokens must be at least 1, got {}", options.new_tokens);
  const std::unique_ptr<ModelFiles> files = open_model(options.model, options.open);
  const Tokenizer tokenizer = Tokenizer::load(files->tokenizer_dir() ? *files->tokenizer_dir() : files->path());
  const int64_t vocab = files->config().vocab_size;
  check_tokenizer_fits_model(tokenizer, vocab, options.model.string());
  const auto candidates = static_cast<int64_t>(tokenizer.vocab_size());
  if (options.other) {
    const int64_t other_vocab = open_model(*options.other)->config().vocab_size;
    NVFP4LM_CHECK(other_vocab == vocab,
                  "parity: --other {} has a vocabulary of {} but {} has {}: their logits cannot "
                  "be compared",
                  options.other->string(), other_vocab, options.model.string(), vocab);
  }

  ParityReport report;
  report.model = options.model.string();
  report.other = options.other ? options.other->string() : "";
  report.tolerances = options.tolerances;
  std::vector<PathSpec> paths = plan_paths(options, *files);

  // One model at a time; consecutive paths on the same model share it.
  std::optional<Qwen3Model> model;
  std::optional<ModelKey> loaded;
  std::unique_ptr<ScratchDirectory> scratch;
  auto load = [&](const ModelKey& key) -> const Qwen3Model& {
    if (loaded && *loaded == key) return *model;
    model.reset();
    ModelOptions model_options;
    model_options.device = key.device;
    model_options.config_path = key.open.config_path;
    model_options.tokenizer_dir = key.open.tokenizer_dir;
    model_options.dequantize_nvfp4 = key.dense;
    model_options.cpu_matmul = key.cpu_matmul;
    model.emplace(Qwen3Model::from_files(*open_model(key.path, key.open), model_options));
    loaded = key;
    return *model;
  };

  const ParityBaseline* baseline = options.baseline;
  std::vector<std::string> texts = options.prompts.empty() ? default_parity_prompts() : options.prompts;
  if (baseline) {
    texts.clear();
    for (const ParityBaseline::Prompt& prompt : baseline->prompts) texts.push_back(prompt.text);
  }
  {
    const Qwen3Model& reference = load(paths.front().model);
    const std::vector<int32_t> eos =
        end_of_sequence_ids(files->config(), find_generation_config(files->path()), tokenizer, vocab);
    for (size_t i = 0; i < texts.size(); ++i) {
      const int64_t new_tokens = baseline ? baseline->new_tokens : options.new_tokens;
      ParityPrompt prompt = make_sequence(reference, tokenizer, texts[i], new_tokens, candidates, eos, i);
      if (baseline) {
        // Every path runs over the baseline's ids, so that its positions line up with the baseline's; the greedy
        // continuation made now is kept to be compared.
        const ParityBaseline::Prompt& before = baseline->prompts[i];
        prompt.greedy_now.assign(prompt.ids.begin() + prompt.prompt_tokens, prompt.ids.end());
        for (const int32_t id : before.ids)
          NVFP4LM_CHECK(id < candidates, "parity --baseline {}: prompt {} has token id {}, outside the tokenizer of {}",
                        baseline->file.string(), i + 1, id, options.model.string());
        prompt.ids = before.ids;
        prompt.prompt_tokens = before.prompt_tokens;
      }
      report.prompts.push_back(std::move(prompt));
    }
  }

  // The prompts run in groups whose logits fit options.max_logit_bytes (one path's), path by path within a group
  // (the models load again for each group): memory is bounded by a group's logits times the paths kept for a later
  // comparison, whatever the number of prompts (300 prompts used to hold every logit of every path: 5.8 GB).
  std::vector<int64_t> prompt_tokens;
  for (const ParityPrompt& prompt : report.prompts) prompt_tokens.push_back(static_cast<int64_t>(prompt.ids.size()));
  const std::vector<ParityPromptGroup> groups = parity_prompt_groups(prompt_tokens, vocab, options.max_logit_bytes);
  auto scratch_dir = [&]() -> fs::path {
    if (!scratch) scratch = std::make_unique<ScratchDirectory>("parity", options.temp_dir);
    return scratch->path();
  };
  for (const ParityPromptGroup& group : groups) {
    // Logits per path for the group's prompts, kept while a later path is judged against them: in memory up to
    // max_logit_bytes in all, the rest in the scratch directory (a single long prompt can exceed it: kept_logits.h).
    std::map<std::string, KeptLogits> kept;
    for (size_t index = 0; index < paths.size(); ++index) {
      PathSpec& spec = paths[index];
      if (!spec.info.skipped.empty()) continue;
      const auto start = Clock::now();
      // One model in memory at a time: the inference model goes before a training model is built.
      auto unload = [&] {
        model.reset();
        loaded.reset();
      };
      if ((spec.copy || spec.kind == PathKind::TrainExport) && !spec.copied) {
        const fs::path out = scratch_dir() / spec.model.path;
        if (spec.copy) {
          log::info("parity: writing {} as {} to {}", options.model.string(), model_format_name(*spec.copy),
                    out.string());
          write_model_copy(*files, out, *spec.copy);
        } else {
          unload();
          log::info("parity: exporting {} as train --export would at step 0 to {}", options.model.string(),
                    out.string());
          export_training_start(*files, out);
        }
        spec.model.path = out;
        spec.copied = true;
      }
      std::optional<Qwen3Trainable> trainable;
      const Qwen3Model* path_model = nullptr;
      if (spec.kind == PathKind::TrainForward) {
        unload();
        trainable.emplace(Qwen3Trainable::from_files(*files, training_options(spec.model.device)));
        spec.info.compute_path = fmt::format("{}/train-forward", spec.model.device.is_cpu() ? "cpu" : "cuda");
        spec.info.precision = trainable->describe();
      } else {
        path_model = &load(spec.model);
        spec.info.compute_path = path_model->compute_path();
        spec.info.precision = path_model->precision();
      }
      const bool needed_later = std::any_of(paths.begin() + static_cast<std::ptrdiff_t>(index) + 1, paths.end(),
                                            [&](const PathSpec& later) { return later.against == spec.info.name; });
      // A group's logits fit max_logit_bytes unless it is one prompt that alone does not: only then do they go to
      // the scratch directory.
      KeptLogits* keep =
          needed_later ? &kept.emplace(spec.info.name, KeptLogits(options.max_logit_bytes, scratch_dir)).first->second
                       : nullptr;
      const double tolerance = options.tolerances.of(spec.tolerance_class);
      for (size_t p = group.begin; p < group.end; ++p) {
        const ParityPrompt& prompt = report.prompts[p];
        // Compared and kept as the path produces them: the path holds one block of rows, not the prompt's [T, V].
        const KeptLogits* reference = spec.against.empty() ? nullptr : &kept.at(spec.against);
        LogitDiffAccumulator diff;
        if (keep) keep->begin(static_cast<int64_t>(prompt.ids.size()), vocab);
        // What a baseline records (when asked), and with a baseline that has this path, its logits at the
        // baseline's top ids.
        ParityPrompt& recorded = report.prompts[p];
        std::vector<ParityTopK>* top = options.record_top_logits ? &recorded.top_logits[spec.info.name] : nullptr;
        const std::vector<ParityTopK>* before_rows = nullptr;
        std::vector<std::vector<float>>* at_baseline = nullptr;
        if (baseline) {
          const auto found = baseline->prompts[p].logits.find(spec.info.name);
          if (found != baseline->prompts[p].logits.end()) {
            before_rows = &found->second;
            at_baseline = &recorded.at_baseline_ids[spec.info.name];
          }
        }
        const LogitRowSink sink = [&](int64_t row, const Tensor& rows) {
          if (reference) reference->compare(p - group.begin, row, rows, candidates, diff);
          if (keep) keep->append(row, rows);
          for (int64_t r = 0; r < rows.dim(0) && (top || at_baseline); ++r) {
            const float* values = rows.data<float>() + r * rows.dim(1);
            if (top) top->push_back(top_logits(values, candidates));
            if (at_baseline == nullptr) continue;
            const auto position = static_cast<size_t>(row + r);
            if (position >= before_rows->size()) continue;
            std::vector<float>& now = at_baseline->emplace_back();
            for (const int32_t id : (*before_rows)[position].ids)
              now.push_back(id < rows.dim(1) ? values[id] : std::nanf(""));
          }
        };
        if (trainable) {
          sink(0, training_logits(*trainable, prompt.ids));
        } else {
          teacher_forced_logits(*path_model, spec.runner, prompt.ids, prompt.prompt_tokens, sink);
        }
        if (reference) {
          ParityPair pair;
          pair.path = spec.info.name;
          pair.against = spec.against;
          pair.tolerance_class = spec.tolerance_class;
          pair.tolerance = tolerance;
          pair.diff = diff.diff();
          if (pair.diff.first_divergence >= 0) {
            pair.token_text = decode_one(tokenizer, pair.diff.token);
            pair.reference_token_text = decode_one(tokenizer, pair.diff.reference_token);
          }
          if (!pair.pass()) {
            report.failures.push_back(
                pair.diff.non_finite
                    ? fmt::format("{} vs {} (prompt {}): NaN or inf logits", pair.path, pair.against, p + 1)
                    : fmt::format("{} vs {} ({}, prompt {}): max |Δlogit| {:.3g} > bound {:.3g}", pair.path,
                                  pair.against, tolerance_class_name(pair.tolerance_class), p + 1,
                                  pair.diff.max_abs_diff, pair.diff.bound(tolerance)));
          }
          report.prompts[p].pairs.push_back(std::move(pair));
        }
      }
      const double seconds = seconds_since(start);
      spec.info.seconds += seconds;
      log::info("parity: {} ({}, {}) ran prompts {}-{} of {} in {:.2f} s", spec.info.name, spec.info.device,
                spec.info.compute_path, group.begin + 1, group.end, report.prompts.size(), seconds);
      // Drop the logits no later path is judged against.
      for (auto it = kept.begin(); it != kept.end();) {
        const bool needed = std::any_of(paths.begin() + static_cast<std::ptrdiff_t>(index) + 1, paths.end(),
                                        [&](const PathSpec& later) { return later.against == it->first; });
        it = needed ? std::next(it) : kept.erase(it);
      }
    }
  }
  // Failures in the order of an ungrouped run: by path, then by prompt.
  std::stable_sort(report.failures.begin(), report.failures.end(), [&](const std::string& a, const std::string& b) {
    return failure_path_rank(paths, a) < failure_path_rank(paths, b);
  });
  for (const PathSpec& spec : paths) report.paths.push_back(spec.info);
  if (baseline) judge_against_baseline(*baseline, options.tolerances.of(ToleranceClass::Baseline), report);
  return report;
}

}  // namespace nvfp4lm
