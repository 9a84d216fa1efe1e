// Exporting trained master weights as a model directory: NVFP4 ModelOpt safetensors, NVFP4 `.dat`, or dense BF16
// safetensors (io/model_writer.h), from a live model at the end of `train --export` or from a checkpoint
// (`nvfp4lm export`).
//
// Which weights are NVFP4, lm_head untying and the shape check: the plan quantize uses too (io/export_plan.h).
// NVFP4 (ModelOpt): the projections (and lm_head with quantize_lm_head) are quantized exactly as QAT computed
// them in training (model/qwen3_trainable.h refresh_quantized): the run's block shape, round-to-nearest-even, and
// one tensor scale per fused group (q/k/v, gate/up; io/weight_names.h fused_scale_group) from the group's joint
// amax / (6 * 448) — so the exported model's weights equal the weights the trained forward used, bit for bit.
// GGUF (one file for llama.cpp-based tools, the tokenizer in its metadata): as ModelOpt with gguf_type nvfp4.
// `.dat` has no tensor scale: its weights are quantized with tensor scale 1 (what the format means), which is
// close to but not exactly the QAT forward; a warning says so. BF16: every master rounded to BF16.
// Dense weights (embeddings, norms) of the NVFP4 formats are stored in `dense_dtype` (default: the dtype the
// source config's torch_dtype names, else BF16); config.json's torch_dtype says which.
//
// Safety: OUT is refused when it is, contains, or lies inside a protected path (the source model, the checkpoint,
// the run directory): an export never overwrites what it reads. An existing OUT is replaced only with overwrite.
// config.json, generation_config.json and the tokenizer files travel with the export.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/files.h"
#include "io/activation_calibration.h"
#include "io/gguf_format.h"
#include "io/model_files.h"
#include "io/safetensors_reader.h"
#include "model/parameter.h"
#include "quant/nvfp4.h"
#include "train/train_options.h"

namespace nvfp4lm {

// config.json's torch_dtype as a DType (float32, bfloat16, float16; nullopt for anything else or none), and back.
std::optional<DType> torch_dtype_of(const nlohmann::json& config);
const char* torch_dtype_name(DType dtype);

// What an export needs besides the weights.
struct ExportSource {
  nlohmann::json config_json;                       // the model's config.json
  std::optional<nlohmann::json> generation_config;  // generation_config.json, when known
  std::vector<fs::path> side_files;                 // tokenizer files etc., copied as they are
  // What OUT may not be, contain or lie in (core/files.h guard_output): the model, data and run files read.
  std::vector<GuardedInput> protected_paths;
};

struct ExportOptions {
  ModelFormat format = ModelFormat::ModeloptNvfp4;  // ModeloptNvfp4, Dat, HfSafetensors (dense BF16) or Gguf
  // Gguf: the projections' type. NVFP4 quantizes exactly as for ModelOpt (QAT's weights, bit for bit, tensor scales
  // as "<name>.scale"); q4_0 / q8_0 / f16 / bf16 encode the masters (io/gguf_model_writer.h).
  gguf::GgmlType gguf_type = gguf::GgmlType::NVFP4;
  Nvfp4Block block = Nvfp4Block::Row1x16;
  bool quantize_lm_head = false;
  std::optional<DType> dense_dtype;  // NVFP4 formats: dtype of the dense weights (see above)
  bool overwrite = false;
  // ModelOpt: measured activation ranges for input_scale (train/calibrate.h), a W4A4 export; none: a weight-only one
  // (W4A16_NVFP4, no input_scale; io/modelopt.h). Error with another format.
  std::optional<ActivationCalibration> calibration = std::nullopt;
};

struct ExportReport {
  fs::path out;
  ModelFormat format = ModelFormat::ModeloptNvfp4;
  int64_t nvfp4_tensors = 0;
  int64_t dense_tensors = 0;
  int64_t parameters = 0;
  uint64_t weight_bytes = 0;
  DType dense_dtype = DType::BF16;
  bool lm_head_untied = false;
  std::vector<std::string> copied_files;
  double seconds = 0;
  bool lora_adapter = false;  // a PEFT LoRA adapter (export_lora_adapter), not a model
  // A dense copy of a model (train/dense_export.h): every weight in dense_dtype.
  bool dense = false;
  int64_t dequantized_tensors = 0;  // NVFP4 weights of the source written dense
  int64_t rounded_values = 0;       // values a narrower dtype could not hold exactly (rounded to nearest even)
};

// Refuses (Error) an OUT that would overwrite a protected path or a run's own files (a step-N name in a run
// directory, even one not written yet), and an existing OUT without overwrite, or one that an output of `kind`
// (model_output_kind of the format) may not replace. Call it before long work (training) as well as at export time.
void check_export_target(const fs::path& out, const ExportSource& source, bool overwrite, OutputKind kind);
// The same rule for any output of a run (`what` in messages, e.g. "--metrics"): guard_output against `protected_paths`,
// and never a name the run uses for its own files in a run directory among them (may_hold_outputs).
void guard_run_output(const fs::path& out, std::string_view what, const std::vector<GuardedInput>& protected_paths,
                      bool overwrite, OutputKind kind);

// masters: every master weight by HF name (Qwen3Trainable::master_weights(), or a checkpoint's model.safetensors),
// on any device, F32 or BF16. Error when one the config needs is missing or misshapen.
ExportReport export_weights(std::span<const NamedTensor> masters, const ExportSource& source, const fs::path& out,
                            const ExportOptions& options);

// The `.dat` export as ONE file (train --output-dat FILE, the F# predecessor's layout): FILE holds the weights
// (what --format dat writes as DIR/model.dat), and config.json, generation_config.json and the tokenizer files are
// written beside it in FILE's directory. A file of that name already there is kept when it holds the same bytes
// and refused otherwise (replaced with `overwrite`): the directory may hold other models' files. Everything is
// made in one temporary directory "FILE.tmp-<pid>" beside FILE (removed on failure, and by the next export to FILE
// when a killed process left it); the files beside FILE are published first, FILE last, each atomically.
void check_dat_file_target(const fs::path& file, const ExportSource& source, bool overwrite);
ExportReport export_dat_file(std::span<const NamedTensor> masters, const ExportSource& source, const fs::path& file,
                             const ExportOptions& options);
// (export_checkpoint below writes this layout for a Dat export to a path ending in ".dat".)
// The same one-file layout for any writer of a `.dat` model directory: `write_directory` makes the directory it is
// given (a temporary), from `source` without its protected paths (FILE and its neighbours are checked here).
using DatDirectoryWriter = std::function<ExportReport(const fs::path& dir, const ExportSource& source)>;
ExportReport export_as_dat_file(const fs::path& file, const ExportSource& source, bool overwrite,
                                const DatDirectoryWriter& write_directory);

// A LoRA run's adapters (Qwen3Trainable::master_weights() of a LoRA model, or a LoRA checkpoint's model.safetensors)
// as a PEFT adapter directory (io/peft_adapter.h) for the base `base_model` (its path, recorded in the config). The
// run's
// --lora, --lora-alpha and --lora-targets give r, lora_alpha and target_modules; with --train-last-layers N the
// adapted layers are layers_to_transform. Refuses OUT like export_weights.
ExportReport export_lora_adapter(std::span<const NamedTensor> adapters, const TrainOptions& run,
                                 const Qwen3Config& config, const ExportSource& source, const fs::path& out,
                                 bool overwrite);

// A checkpoint as an export input: `path` is a checkpoint directory (step-N) or a run directory (its newest
// complete checkpoint). The config comes from the checkpoint's trainer_state.json ("model"); the tokenizer files
// from the run directory's source-model/ copy (or, if that is gone, beside the original model).
struct CheckpointExportInput {
  fs::path checkpoint;
  int64_t step = 0;
  TrainOptions run_options;  // the run's settings (block, quantize_lm_head: the export defaults)
  ExportSource source;
  // Activation ranges the run recorded in its last steps (train --calibrate-steps), when it did.
  std::optional<ActivationCalibration> recorded_calibration = std::nullopt;
  // The checkpoint's model.safetensors, mapped and verified once chosen from a run directory: a run still training
  // may prune the checkpoint while it is exported, and the mapping keeps what was verified readable.
  std::shared_ptr<SafetensorsFile> verified_model;
};
// `path` a step-N directory, or a run directory: its newest complete checkpoint, taken again when the run deletes
// the one chosen before it was read (a training that saves and prunes while the export runs).
CheckpointExportInput open_checkpoint_for_export(const fs::path& path);

// The checkpoint's master weights (views of its model.safetensors), after verifying its checksums.
std::vector<NamedTensor> load_checkpoint_masters(const CheckpointExportInput& input);

// Verifies the checkpoint's checksums, then writes OUT from its model.safetensors; or from `masters` when given (a LoRA
// checkpoint's adapters merged into its base, train/lora_merge.h), with the checkpoint's config and side files.
ExportReport export_checkpoint(const CheckpointExportInput& input, const fs::path& out, const ExportOptions& options,
                               std::optional<std::span<const NamedTensor>> masters = std::nullopt);
// The refusals of export_checkpoint, on their own: to be called before long work (a merge, a calibration).
void check_checkpoint_export_target(const CheckpointExportInput& input, const fs::path& out,
                                    const ExportOptions& options);

// "exported NVFP4 (ModelOpt) to out/ in 1.2 s: 14 NVFP4 + 9 dense tensors, 12.3 MiB of weights, tokenizer copied"
std::string describe_export(const ExportReport& report);

}  // namespace nvfp4lm
