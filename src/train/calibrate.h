// Activation calibration (ModelOpt's "max" algorithm): run a model forward over calibration text and record the
// largest |x| of every linear's input (Qwen3Trainable::set_calibration), from which a ModelOpt export writes
// input_scale = amax / (6 * 448) (io/activation_calibration.h).
//
// The text is read like training data (read_dataset: any format, the model's chat template), every token counted
// (train_on_everything), samples cut to seq_len as training cuts them; samples run one per forward, in file order,
// without padding, until max_tokens tokens have run (the last sample is cut to fit). Which forward runs is the
// caller's choice: `quantize --calibrate` calibrates the source model unquantized (ModelOpt calibrates with its
// quantizers disabled), `export --calibrate` the trained QAT forward, whose weights are the export's bit for bit.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "core/files.h"
#include "data/dataset.h"
#include "io/activation_calibration.h"
#include "model/qwen3_trainable.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "train/export.h"

namespace nvfp4lm {

inline constexpr int64_t kDefaultCalibrationTokens = 4096;

struct CalibrationOptions {
  fs::path data;
  int64_t max_tokens = kDefaultCalibrationTokens;
  int64_t seq_len = 512;  // capped at the model's context
  DataFormat data_format = DataFormat::Auto;
  std::string chat_template = "auto";  // --chat-template (tokenizer/chat_template.h)
  Device device = Device::cpu();       // where the calibration forward runs
};

// tokens_done of tokens_total after each forward.
using CalibrationProgressFn = std::function<void(int64_t tokens_done, int64_t tokens_total)>;

// Error (one line) for empty data or max_tokens < 1. `source` of the result names the data and the command.
ActivationCalibration calibrate_activations(Qwen3Trainable& model, const Tokenizer& tokenizer,
                                            const CalibrationOptions& options, const std::string& command,
                                            const CalibrationProgressFn& progress = {});

// `quantize --calibrate`: the source model's own forward, unquantized (qat off), on options.device.
ActivationCalibration calibrate_source_model(const ModelFiles& source, const Tokenizer& tokenizer,
                                             const CalibrationOptions& options,
                                             const CalibrationProgressFn& progress = {});

// `export --calibrate`: the forward of the export being written — the checkpoint's masters quantized as `export`
// quantizes them (its block shape and lm_head choice; the run's W4A4 activations when it trained with them), on
// options.device, with the run's tokenizer (its source-model/ copy; Error when the run has none).
ActivationCalibration calibrate_checkpoint(const CheckpointExportInput& input, const ExportOptions& export_options,
                                           const CalibrationOptions& options,
                                           const CalibrationProgressFn& progress = {});

}  // namespace nvfp4lm
