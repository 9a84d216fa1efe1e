// `nvfp4lm export RUN OUT --merge-lora --qat-steps N`: recover the quality an NVFP4 export of merged adapters loses.
//
// A merged linear W + (alpha/r)·B·A is not on the NVFP4 grid, so re-quantizing it (train/lora_merge.h) moves the
// model away from what the LoRA run trained. Here the merge becomes the starting point of a short full-parameter QAT
// run instead: its weights are written as an F32 model (<qat run>-start, F32 so the start is the merge itself, not
// its BF16 rounding), `steps` optimizer steps of QAT (the LoRA run's QAT mode, w4a16 when it had none) train every
// weight on the LoRA run's data with its batch shape, seed and NVFP4 settings, at `lr` (cosine to 0, no warmup: the
// start is already good), and the run's end is exported to OUT in the asked format. Both the start model and the QAT
// run directory are kept (nothing is deleted): the QAT run can be resumed or extended with `nvfp4lm train --resume
// --output DIR`, and its metrics show the loss from the merge's (its first step) down.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "core/files.h"
#include "model/parameter.h"
#include "train/export.h"
#include "train/train_options.h"
#include "train/trainer.h"

namespace nvfp4lm {

struct MergeQatOptions {
  int64_t steps = 0;
  double lr = 1e-5;
  fs::path run_dir;            // the QAT run's directory; empty: <the LoRA run>/merge-qat
  std::string device = "cpu";  // where the QAT steps run (train's --device)
  double max_memory_gib = 0;   // train's --max-memory (0: no limit)
};

// The QAT run's directory for `options` (run_dir, or the default beside the checkpoint) and its start model's.
fs::path merge_qat_run_dir(const CheckpointExportInput& input, const MergeQatOptions& options);
fs::path merge_qat_start_dir(const fs::path& run_dir);

// The QAT run's settings: the LoRA run's data, batch shape, seed, QAT and NVFP4 settings, without adapters, over
// `start_model`, for options.steps steps at options.lr, exporting to `out` as `export_options` say. Error for an
// export these steps cannot serve (no NVFP4 weights: --format bf16 or a non-NVFP4 GGUF type; a dense dtype or an
// activation calibration, which train's export does not take).
TrainOptions merge_qat_train_options(const TrainOptions& lora_run, const fs::path& start_model, const fs::path& run_dir,
                                     const fs::path& out, const ExportOptions& export_options,
                                     const MergeQatOptions& options);

struct MergeQatResult {
  fs::path start_model;
  fs::path run_dir;
  TrainSummary summary;  // its export_report: OUT
};

// Writes `merged` (merge_lora_adapters' masters, the checkpoint's config and side files) as the F32 start model,
// makes the QAT run's Trainer and hands it to `train` (the command line prints its header and progress; default:
// Trainer::run), whose summary reports the export. The start model, the run directory and OUT must not exist (Error
// before any work; OUT may with export_options.overwrite).
using MergeQatTrain = std::function<TrainSummary(Trainer&)>;
MergeQatResult recover_merge_with_qat(const CheckpointExportInput& input, std::span<const NamedTensor> merged,
                                      const fs::path& out, const ExportOptions& export_options,
                                      const MergeQatOptions& options, const MergeQatTrain& train = {});

}  // namespace nvfp4lm
