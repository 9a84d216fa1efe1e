// Helpers shared by the model-running commands (generate, chat, bench, diagnose):
//  - --device / --max-memory: parsed and checked before anything is loaded; a device that cannot run (no CUDA in
//    this build, no GPU, an old GPU) is an Error naming the reason, never a silent CPU run;
//  - the first stderr line every command prints: "nvfp4lm generate: device cpu, compute path cpu/dequant-gemm,
//    precision fp32 (weights NVFP4)". The model's own load log says the same, so it is silenced at the default
//    log level to keep this line first (--log-level debug shows both);
//  - model + tokenizer loading (their flags: cli/flag_rows.h);
//  - the registry of `bench` subcommands: `bench infer` lives in cmd_bench.cpp; another file adds e.g.
//    `bench train` with a static BenchRegistration, like commands do with CommandRegistration.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/command.h"
#include "core/device.h"
#include "core/files.h"
#include "core/logging.h"
#include "core/memory_guard.h"
#include "infer/sampler.h"
#include "model/qwen3_decode_step.h"
#include "model/qwen3_model.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm {
class Trainer;
struct TrainSummary;
}  // namespace nvfp4lm

namespace nvfp4lm::cli {

// ---- device -----------------------------------------------------------------------------------------------
struct DeviceFlags {
  std::string device = "cpu";
  double max_memory_gib = 0;  // 0: no limit
};
// --device and --max-memory (core/device.h open_device: the device checked, the memory tracker's limit set).
Device setup_device(const DeviceFlags& flags);
// --gpu-limit-gb, --gpu-over-secs, --gpu-poll-secs (core/memory_guard.h).
struct GuardFlags {
  double limit_gb = 0, over_secs = 0, poll_secs = 0.5;
};
// The guard those flags ask for on `device`, its description logged; nullptr without --gpu-limit-gb. Keep it for the
// command's life.
std::unique_ptr<MemoryGuard> start_memory_guard(const GuardFlags& flags, Device device);
// --deterministic: batch-invariant kernels on a CUDA device (ops/batch_invariance.h), said in a log line; the
// header's compute path then ends in "+batch-invariant". The CPU's kernels are batch-invariant whatever it says.
void set_deterministic(Device device, bool deterministic);

// ---- header line ------------------------------------------------------------------------------------------
// `devices`: one device's label, or several for a command that runs on more than one (parity).
std::string header_line(std::string_view command, std::string_view devices, std::string_view compute_path,
                        std::string_view precision);
// Writes header_line + '\n' to stderr.
void print_header(std::string_view command, Device device, std::string_view compute_path, std::string_view precision);
// A trainer's whole run as `train` shows it: the header line (as `command`), the set-up lines, the progress display
// over the steps, and the summary lines after.
TrainSummary run_training_shown(std::string_view command, Trainer& trainer);
void print_header(std::string_view command, std::string_view devices, std::string_view compute_path,
                  std::string_view precision);

// ---- model ------------------------------------------------------------------------------------------------
struct ModelFlags {
  std::string model;
  std::string tokenizer;          // --tokenizer DIR
  std::string config;             // --config FILE
  std::string cpu_matmul;         // --cpu-matmul bf16|fp32 (ops/cpu_matmul.h); empty: the reference, fp32
  std::string w4a4 = "on";        // --w4a4 on|off (ModelOptions::w4a4_activations)
  std::vector<std::string> lora;  // --lora NAME=DIR: PEFT adapters applied at run time (model/lora_runtime.h)
};

// Loads the model onto `device` (its load log silenced, see above), prints the header line for `command`, then
// one info line about the model, and one about its LoRA adapters (--lora) when it has any.
Qwen3Model load_model(std::string_view command, const ModelFlags& flags, Device device);
// generate / chat: the adapter every token runs with (the one --lora, index 0), or kNoLoraAdapter without --lora.
// Error naming `command` for more than one.
int single_lora_adapter(std::string_view command, const ModelFlags& flags);
// A second model of a command (eval's --reference): loaded the same way, without a header line; one info line
// names it with its compute path and precision.
Qwen3Model load_second_model(std::string_view role, const ModelFlags& flags, Device device);
// The model's tokenizer (--tokenizer, else the one beside the model); Error when its ids exceed the model's
// vocabulary.
Tokenizer load_tokenizer(const Qwen3Model& model);

// ---- decode steps -------------------------------------------------------------------------------------------
// The decode mode Qwen3CachedLm gets for `device` and --cuda-graph on|off (generate, chat, serve, bench, stress): on
// CUDA, single-token decode steps replay one captured CUDA graph (model/qwen3_decode_step.h) unless off; the CPU
// always runs forward_cached (none; the flag is ignored there).
std::optional<DecodeMode> decode_mode_for(Device device, const std::string& cuda_graph);

// ---- benchmark models -----------------------------------------------------------------------------------------
// The model flags of a benchmark (`command`: "bench infer"): exactly one of --model M and --preset P, --nvfp4 only
// with --preset; a UsageError otherwise.
void check_bench_model_flags(std::string_view command, const std::string& model, const std::string& preset, bool nvfp4);
// The model of a benchmark: --model M as given, or --preset P [--nvfp4]: a random model of that shape synthesised
// into a scratch directory under the system temp dir (removed with the object), with the bundled tokenizer when
// asked, quantized to NVFP4 (ModelOpt layout) with --nvfp4. The flags are check_bench_model_flags'.
class BenchModel {
 public:
  BenchModel(const std::string& model, const std::string& preset, bool nvfp4, bool with_tokenizer);
  BenchModel(const BenchModel&) = delete;
  BenchModel& operator=(const BenchModel&) = delete;

  const std::string& path() const { return path_; }
  // "preset:small (nvfp4)", or the --model path.
  const std::string& name() const { return name_; }
  // "preset small (...) synthesised and quantized to NVFP4 in 3.1 s", or empty for --model.
  const std::string& note() const { return note_; }

 private:
  std::unique_ptr<ScratchDirectory> scratch_;
  std::string path_, name_, note_;
};

// ---- bench subcommands --------------------------------------------------------------------------------------
struct BenchSpec {
  std::string name;
  std::string help;
  CommandSetup setup;
};
std::vector<BenchSpec>& bench_registry();  // defined in cmd_bench.cpp
struct BenchRegistration {
  BenchRegistration(std::string name, std::string help, CommandSetup setup) {
    bench_registry().push_back({std::move(name), std::move(help), std::move(setup)});
  }
};

// A benchmark's result on stdout: the table `text`, or the JSON alone with --json -, or the table plus
// "wrote FILE" after writing the JSON to json_path (atomically). On the emulated CUDA device both say that the
// timings are the emulator's ("emulated": true in the JSON).
// Before a benchmark runs: --json FILE may not exist without --overwrite, nor be or lie in the model.
void check_bench_json_path(const std::string& json_path, bool overwrite, const std::string& model);
void print_bench_result(const std::string& text, nlohmann::json json, const std::string& json_path, bool overwrite,
                        Device device);

}  // namespace nvfp4lm::cli
