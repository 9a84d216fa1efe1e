// See cli_common.h.
#include "cli/cli_common.h"

#include <fmt/ranges.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>

#include "cli/progress_bar.h"
#include "core/error.h"
#include "core/files.h"
#include "core/logging.h"
#include "core/memory.h"
#include "core/memory_guard.h"
#include "io/hf_config.h"
#include "io/model_files.h"
#include "io/quantize_model.h"
#include "io/synth_model.h"
#include "ops/batch_invariance.h"
#include "ops/cpu_backend.h"
#include "ops/cpu_matmul.h"
#include "train/metrics.h"
#include "train/trainer.h"

namespace nvfp4lm::cli {

std::optional<DecodeMode> decode_mode_for(Device device, const std::string& cuda_graph) {
  if (!device.is_cuda() || cuda_graph == "off") return std::nullopt;
  return DecodeMode::Graph;
}

Device setup_device(const DeviceFlags& flags) { return open_device(flags.device, flags.max_memory_gib); }

std::unique_ptr<MemoryGuard> start_memory_guard(const GuardFlags& flags, Device device) {
  const MemoryGuardOptions options{
      .limit_gib = flags.limit_gb, .over_seconds = flags.over_secs, .poll_seconds = flags.poll_secs};
  check_memory_guard_options(options);  // also without a guard: the flags' values are checked either way
  if (options.limit_gib == 0) return nullptr;
  auto guard = std::make_unique<MemoryGuard>(device, options);
  log::info("{}", guard->description());
  return guard;
}

void set_deterministic(Device device, bool deterministic) {
  set_batch_invariant_kernels(deterministic && device.is_cuda());
  if (!deterministic) return;
  if (device.is_cuda()) {
    log::info(
        "--deterministic: batch-invariant CUDA kernels (fused NVFP4 / row-exact linears for every row, prompt "
        "attention by the prefill kernel): answers do not depend on the cache, the chunking or the batch; "
        "prefill is slower");
  } else {
    log::info("--deterministic: the CPU's kernels are batch-invariant already (nothing changes)");
  }
}

std::string header_line(std::string_view command, std::string_view devices, std::string_view compute_path,
                        std::string_view precision) {
  return fmt::format("nvfp4lm {}: device {}, compute path {}, precision {}", command, devices, compute_path, precision);
}

void print_header(std::string_view command, Device device, std::string_view compute_path, std::string_view precision) {
  print_header(command, device.label(), compute_path, precision);
}

void print_header(std::string_view command, std::string_view devices, std::string_view compute_path,
                  std::string_view precision) {
  const std::string line = header_line(command, devices, compute_path, precision) + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  if (const std::string warning = cpu_blas_threading_warning(); !warning.empty()) log::warn("{}", warning);
}

TrainSummary run_training_shown(std::string_view command, Trainer& trainer) {
  print_header(command, trainer.device(), trainer.compute_path(), trainer.precision());
  for (const std::string& line : trainer.setup_lines()) log::info("{}", line);
  ProgressDisplay display(trainer.device(), stderr_is_terminal());
  Trainer::Progress progress;
  progress.on_step = [&](const StepMetrics& metrics) { display.update(metrics); };
  progress.before_output = [&] { display.finish(); };
  TrainSummary summary = trainer.run(progress);
  display.finish();
  for (const std::string& line : format_train_summary(summary)) log::info("{}", line);
  return summary;
}

namespace {

struct LoadedModel {
  std::unique_ptr<ModelFiles> files;
  std::optional<Qwen3Model> model;
  double seconds = 0;
};

LoadedModel open_flags_model(const ModelFlags& flags, Device device) {
  const auto start = std::chrono::steady_clock::now();
  OpenModelOptions open_options;
  if (!flags.config.empty()) open_options.config_path = flags.config;
  if (!flags.tokenizer.empty()) open_options.tokenizer_dir = flags.tokenizer;
  LoadedModel loaded;
  loaded.files = open_model(flags.model, open_options);
  ModelOptions options;
  options.device = device;
  if (!flags.cpu_matmul.empty())
    options.cpu_matmul = parse_cpu_matmul(flags.cpu_matmul);  // checked while parsing (rows::cpu_matmul)
  options.w4a4_activations = flags.w4a4 != "off";             // on|off, checked while parsing (rows::w4a4)
  options.config_path = open_options.config_path;
  options.tokenizer_dir = open_options.tokenizer_dir;
  {
    const QuietInfoLogs quiet;  // the model logs what the header line says; keep the header first
    loaded.model.emplace(Qwen3Model::from_files(*loaded.files, options));
  }
  loaded.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return loaded;
}

std::string model_summary(const LoadedModel& loaded) {
  const Qwen3Model& model = *loaded.model;
  return fmt::format("{}: {}, {} layers, hidden {}, vocab {}, {:.1f} MiB of weights, loaded in {:.2f} s",
                     loaded.files->path().string(), model_format_name(loaded.files->format()),
                     model.config().num_hidden_layers, model.config().hidden_size, model.config().vocab_size,
                     to_mib(model.weights().nbytes()), loaded.seconds);
}

}  // namespace

Qwen3Model load_model(std::string_view command, const ModelFlags& flags, Device device) {
  LoadedModel loaded = open_flags_model(flags, device);
  const bool invariant = device.is_cuda() && batch_invariant_kernels();
  print_header(command, device, loaded.model->compute_path() + (invariant ? "+batch-invariant" : ""),
               loaded.model->precision());
  log::info("model {}", model_summary(loaded));
  if (!flags.lora.empty()) {
    std::vector<LoraAdapterSpec> specs;
    for (const std::string& text : flags.lora) specs.push_back(parse_lora_adapter_spec(text));
    Qwen3Model& model = *loaded.model;
    model.set_lora_adapters(std::make_shared<const LoraAdapterSet>(
        LoraAdapterSet::load(specs, model.config(), model.compute_dtype(), model.device())));
  }
  return std::move(*loaded.model);
}

int single_lora_adapter(std::string_view command, const ModelFlags& flags) {
  NVFP4LM_CHECK(flags.lora.size() <= 1,
                "{} applies one --lora adapter to its answer, got {} (serve takes several and picks one per request)",
                command, flags.lora.size());
  return flags.lora.empty() ? kNoLoraAdapter : 0;
}

Qwen3Model load_second_model(std::string_view role, const ModelFlags& flags, Device device) {
  LoadedModel loaded = open_flags_model(flags, device);
  log::info("{} {}; compute path {}, precision {}", role, model_summary(loaded), loaded.model->compute_path(),
            loaded.model->precision());
  return std::move(*loaded.model);
}

Tokenizer load_tokenizer(const Qwen3Model& model) {
  const Tokenizer tokenizer = Tokenizer::load(model.tokenizer_dir() ? *model.tokenizer_dir() : model.source());
  check_tokenizer_fits_model(tokenizer, model.config().vocab_size, model.source().string());
  return tokenizer;
}

void check_bench_model_flags(std::string_view command, const std::string& model, const std::string& preset,
                             bool nvfp4) {
  if (model.empty() == preset.empty())
    throw UsageError(fmt::format("{}: pass exactly one of --model M and --preset ({})", command,
                                 fmt::join(qwen3_preset_names(), ", ")));
  if (nvfp4 && preset.empty())
    throw UsageError(fmt::format(
        "{}: --nvfp4 quantizes a --preset model; quantize a --model with `nvfp4lm quantize` first", command));
}

BenchModel::BenchModel(const std::string& model, const std::string& preset, bool nvfp4, bool with_tokenizer) {
  check_bench_model_flags("bench", model, preset, nvfp4);  // the commands check first, naming themselves
  if (preset.empty()) {
    path_ = name_ = model;
    return;
  }
  const Qwen3Config config = qwen3_preset(preset);
  scratch_ = std::make_unique<ScratchDirectory>("bench");
  const auto start = std::chrono::steady_clock::now();
  const QuietInfoLogs quiet;
  SynthOptions synth;
  synth.bundled_tokenizer = with_tokenizer;
  const fs::path dense = scratch_->path() / "dense";
  synth_model(config, dense, synth);
  path_ = dense.string();
  if (nvfp4) {
    const fs::path quantized = scratch_->path() / "nvfp4";
    quantize_model(*open_model(dense), quantized, QuantizeOptions{});
    path_ = quantized.string();
  }
  name_ = "preset:" + preset + (nvfp4 ? " (nvfp4)" : "");
  note_ = fmt::format("preset {} ({} parameters) synthesised{} in {:.1f} s", preset, config.total_parameters(),
                      nvfp4 ? " and quantized to NVFP4" : "",
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

void check_bench_json_path(const std::string& json_path, bool overwrite, const std::string& model) {
  if (json_path.empty() || json_path == "-") return;
  guard_output(json_path, "--json", {{model, "the model (--model)"}}, overwrite, OutputKind::File);
}

void print_bench_result(const std::string& text, nlohmann::json json, const std::string& json_path, bool overwrite,
                        Device device) {
  std::string out = text;
  if (device.is_cuda() && cuda_is_emulated()) {
    // Emulated CUDA times the emulator: the numbers stay (they show the run happened) but are never GPU numbers.
    json["emulated"] = true;
    json["timing_note"] = "emulated CUDA device on the CPU: timings are the emulator's, not a GPU's";
    out = "note: emulated CUDA device on the CPU: these timings are the emulator's, not a GPU's\n" + out;
  }
  if (json_path == "-") {
    out = json.dump(2) + "\n";
  } else if (!json_path.empty()) {
    write_file_atomic(json_path, json.dump(2) + "\n", overwrite);
    out += fmt::format("wrote {}\n", json_path);
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
}

}  // namespace nvfp4lm::cli
