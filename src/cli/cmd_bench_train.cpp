// `nvfp4lm bench train`: throughput, FLOP/s against a dense GEMM measured in the same run, and memory of full
// training steps (tools/bench_train.h), as a table on stdout and optionally JSON.
//
// bench train (--model M | --preset P) --seq-len N --batch B [--steps S] [--warmup-steps W] [--device cpu|cuda]
//             [--qat w4a16|w4a4|off] [--optimizer adamw|adamw8bit] [--master fp32|bf16] [--json FILE|-]
// --preset builds a random model of that shape in memory (no files); --model trains a copy of a model's weights
// (nothing is written). Every flag is checked before the model is built; the header line (device, compute path,
// precision) is the first line on stderr.
#include <fmt/ranges.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "cli/cli_common.h"
#include "cli/command.h"
#include "cli/flag_rows.h"
#include "cli/train_flags_cli.h"
#include "core/error.h"
#include "core/files.h"
#include "core/logging.h"
#include "core/memory.h"
#include "core/stopwatch.h"
#include "io/hf_config.h"
#include "io/model_files.h"
#include "io/synth_model.h"
#include "model/qwen3_trainable.h"
#include "tools/bench_train.h"
#include "train/optim/optimizer.h"
#include "train/train_options.h"

namespace nvfp4lm::cli {
namespace {

// The trainer's precision (train_step.h) and the benchmark's QAT mode.
std::string bench_precision(Device device, bool bf16_master, QatMode qat) {
  return fmt::format("{}, QAT {}", train_precision(device, bf16_master), qat_mode_name(qat));
}

struct BenchTrainCliOptions {
  std::string model;
  std::string preset;
  std::string config;
  DeviceFlags device;
  TrainBenchOptions bench;
  std::string qat = "w4a16";
  std::string optimizer = "adamw";
  std::string master = "fp32";
  std::string recompute = "none";
  bool fused_update = false;
  bool packed_weights = false;
  int lora = 0;
  int64_t gemm_size = 0;
  std::string json;
  bool overwrite = false;
};

int run_bench_train(const BenchTrainCliOptions& cli) {
  check_bench_model_flags("bench train", cli.model, cli.preset, /*nvfp4=*/false);
  NVFP4LM_CHECK(cli.config.empty() || !cli.model.empty(), "bench train: --config goes with --model, not --preset");
  check_train_bench_options(cli.bench);
  check_bench_json_path(cli.json, cli.overwrite, cli.model);
  const QatMode qat = parse_qat_mode(cli.qat);
  NVFP4LM_CHECK(cli.optimizer == "adamw" || cli.optimizer == "adamw8bit", "--optimizer {}: choose adamw or adamw8bit",
                cli.optimizer);
  NVFP4LM_CHECK(cli.master == "fp32" || cli.master == "bf16", "--master {}: choose fp32 or bf16", cli.master);
  NVFP4LM_CHECK(cli.gemm_size >= 0, "--gemm-size must be >= 0 (0: 2048 on the CPU, 8192 on CUDA), got {}",
                cli.gemm_size);
  const Qwen3Config preset = cli.preset.empty() ? Qwen3Config{} : qwen3_preset(cli.preset);
  const Device device = setup_device(cli.device);
  const bool bf16_master = cli.master == "bf16";
  const Recompute recompute = parse_recompute(cli.recompute);  // checked while parsing (the train row)

  print_header("bench train", device, train_compute_path(device, qat), bench_precision(device, bf16_master, qat));
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<ModelFiles> files;
  if (cli.preset.empty()) {
    OpenModelOptions open_options;
    if (!cli.config.empty()) open_options.config_path = cli.config;
    files = open_model(cli.model, open_options);
  } else {
    files = random_model_files(preset, "preset:" + cli.preset, cli.bench.seed);
  }
  const Qwen3Config config = files->config();
  NVFP4LM_CHECK(cli.bench.seq_len <= config.max_position_embeddings,
                "--seq-len {} exceeds the context of {} ({} tokens)", cli.bench.seq_len, files->path().string(),
                config.max_position_embeddings);

  TrainModelOptions model_options;
  model_options.qat = qat;
  model_options.device = device;
  model_options.bf16_master = bf16_master;
  model_options.recompute = recompute;
  model_options.fused_update = cli.fused_update;
  model_options.packed_weights = cli.packed_weights;
  model_options.lora.rank = cli.lora;  // alpha = rank, every linear
  model_options.lora.seed = cli.bench.seed;
  NVFP4LM_CHECK(cli.lora == 0 || !bf16_master, "bench train: --lora keeps fp32 adapter masters: drop --master bf16");
  std::optional<Qwen3Trainable> model;
  std::unique_ptr<Optimizer> optimizer;
  {
    const QuietInfoLogs quiet;  // from_files logs what the header line says
    model.emplace(Qwen3Trainable::from_files(*files, model_options));
    const MemoryPhase phase("load");
    AdamWOptions adamw;
    adamw.seed = cli.bench.seed;
    optimizer = make_optimizer(cli.optimizer, model->parameters(), adamw);
  }
  files.reset();
  log::info("model {} ({} layers, hidden {}, vocab {}, {:.1f}M parameters) ready in {:.1f} s; optimizer {}",
            cli.preset.empty() ? cli.model : "preset:" + cli.preset, config.num_hidden_layers, config.hidden_size,
            config.vocab_size, config.total_parameters() / 1e6, seconds_since(start), cli.optimizer);
  log::info("bench train: {} warm-up + {} timed steps of {} x {} random tokens", cli.bench.warmup_steps,
            cli.bench.steps, cli.bench.batch, cli.bench.seq_len);

  TrainBenchResult result = run_train_bench(*model, *optimizer, cli.bench);
  set_gemm_ceilings(result, measure_gemm_ceilings(device, config, result.tokens_per_step, cli.gemm_size));

  nlohmann::json json = train_bench_json(result);
  json["benchmark"] = "train";
  json["model"] = cli.preset.empty() ? cli.model : "preset:" + cli.preset;
  json["device"] = device.label();
  json["compute_path"] = train_compute_path(device, qat);
  json["precision"] = bench_precision(device, bf16_master, qat);
  json["qat"] = std::string(qat_mode_name(qat));
  json["optimizer"] = cli.optimizer;
  json["master"] = cli.master;
  json["recompute"] = cli.recompute;
  json["fused_update"] = cli.fused_update;
  json["packed_weights"] = cli.packed_weights;
  json["lora_rank"] = cli.lora;
  json["parameters"] = config.total_parameters();

  std::string text = fmt::format("{:<28} {}\n{:<28} {} on {}, {}; optimizer {}{}; recompute {}\n", "model",
                                 json["model"].get<std::string>(), "compute path", train_compute_path(device, qat),
                                 device.label(), bench_precision(device, bf16_master, qat), cli.optimizer,
                                 cli.fused_update ? " fused into the backward (no clipping)" : "", cli.recompute);
  if (cli.packed_weights) text += fmt::format("{:<28} packed NVFP4, dequantized per block\n", "forward weights");
  if (cli.lora > 0)
    text += fmt::format("{:<28} rank {} on every linear ({} adapter tensors), the base frozen\n", "LoRA", cli.lora,
                        model->parameters().size());
  text += train_bench_table(result);
  print_bench_result(text, json, cli.json, cli.overwrite, device);
  return 0;
}

BenchRegistration bench_train_registration(
    "train", "Training step throughput, FLOP/s against a dense GEMM measured in the same run, and memory",
    [](CLI::App& app) -> CommandRun {
      auto options = std::make_shared<BenchTrainCliOptions>();
      const std::string preset_names = fmt::format("{}", fmt::join(qwen3_preset_names(), ", "));
      // The rows of `train` (train/train_flags.h) where bench means the same, with bench's own help where its default
      // or meaning differs.
      add_flags(
          app,
          {
              FlagUse(rows::model(), options->model),
              FlagUse(rows::preset(), options->preset,
                      "a random model of this shape, in memory (" + preset_names + ")"),
              FlagUse(rows::config(), options->config,
                      "with --model: config.json for a .dat model without one beside it"),
              FlagUse(train_flag_row("seq_len"), options->bench.seq_len, "tokens per row").required(),
              FlagUse(train_flag_row("batch"), options->bench.batch, "rows per step").required(),
              FlagUse({.name = "--steps",
                       .help = "timed optimizer steps (default 5)",
                       .value = FlagNumber<int64_t>{{1, int64_t{1} << 20}}},
                      options->bench.steps),
              FlagUse({.name = "--warmup-steps",
                       .help = "untimed steps first (default 1)",
                       .value = FlagNumber<int64_t>{{0, int64_t{1} << 20}}},
                      options->bench.warmup_steps),
              FlagUse(train_flag_row("qat"), options->qat),
              FlagUse(train_flag_row("optimizer"), options->optimizer),
              FlagUse(train_flag_row("master"), options->master),
              FlagUse(train_flag_row("packed_weights"), options->packed_weights),
              FlagUse(train_flag_row("fused_update"), options->fused_update,
                      "run each layer's optimizer update inside the backward (one layer's gradients; no clipping)"),
              FlagUse(train_flag_row("recompute"), options->recompute),
              FlagUse(train_flag_row("lora"), options->lora,
                      "train rank-R LoRA adapters (alpha R) on every linear over the frozen base (default 0: every "
                      "weight)"),
              FlagUse(train_flag_row("lr"), options->bench.lr, "constant learning rate (default 1e-5)"),
              FlagUse(train_flag_row("seed"), options->bench.seed,
                      "seed of the random ids and of a --preset's weights (default 0)"),
              FlagUse({.name = "--gemm-size",
                       .help = "size of the square GEMM of the ceiling (default 0: 2048 on the CPU, 8192 on CUDA)",
                       .value = FlagNumber<int64_t>{{0, int64_t{1} << 16}}},
                      options->gemm_size),
              FlagUse(rows::json_file(), options->json),
              FlagUse(rows::json_file_overwrite(), options->overwrite),
          });
      add_flags(app, device_flags(options->device));
      return [options] { return run_bench_train(*options); };
    });

}  // namespace
}  // namespace nvfp4lm::cli
