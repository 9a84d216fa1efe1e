// Training checkpoints (DESIGN.md §4): everything needed to resume a run bit for bit.
//
// Layout: <run_dir>/step-N/ (N = optimizer steps completed, no padding) with
//   model.safetensors      master weights by Hugging Face name, in their own dtype (F32 or BF16)
//   optimizer.safetensors  optimizer state by "<parameter name>.<state>" (Optimizer::state_tensors); the
//                          metadata key "nvfp4lm.optimizer" holds Optimizer::describe() as JSON: kind, step
//                          counter, hyper-parameters (and block size for 8-bit states)
//   trainer_state.json     the training loop's JSON object (below)
//   checksums.json         size and XXH64 of the three files (io/checksum.h), written last
//
// Crash safety: everything is written into step-N.tmp/ (each file fsynced), then the directory is fsynced,
// renamed to step-N and the parent fsynced. A checkpoint is deleted (pruning, or replacing a step-N) by renaming it
// to step-N.deleting first and removing that. A crash at any point leaves either no step-N or a complete one;
// every reader ignores *.tmp and *.deleting directories (and latest_checkpoint() any step-N whose checksums do not
// verify), so a run resumes, and an export reads, the newest checkpoint that is really complete. The next
// prune_checkpoints (the next save of a training in that directory) finishes an interrupted deletion.
//
// trainer_state.json: the loop passes a JSON object and gets the same object back from load_checkpoint().
// save_checkpoint sets three keys itself: "format": "nvfp4lm-trainer-state", "format_version"
// (kTrainerStateFormatVersion) and "step" (= N). The keys the training loop is expected to fill:
//   "epoch":          int, epochs completed
//   "data_position":  object, whatever the data loader needs to continue with the next batch exactly
//                     (e.g. {"epoch_seed": 7, "next_sample": 12345})
//   "rng":            object of named generator states, each rng_state_to_json(Rng::state())
//   "config":         object, the run's settings (to refuse or warn about a resume with different ones)
//   "metrics":        array, the last few logged records (loss, lr, grad norm, tokens/s)
// Unknown keys are kept. JSON numbers round-trip exactly (doubles as shortest round-trip text, u64 as integers).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/rng.h"
#include "io/checksum.h"
#include "model/parameter.h"
#include "train/optim/optimizer.h"

namespace nvfp4lm {

inline constexpr int kTrainerStateFormatVersion = 1;
inline constexpr const char* kModelFileName = "model.safetensors";
inline constexpr const char* kOptimizerFileName = "optimizer.safetensors";
inline constexpr const char* kTrainerStateFileName = "trainer_state.json";
inline constexpr const char* kOptimizerMetadataKey = "nvfp4lm.optimizer";
// The run directory's copy of the source model's small files (config, generation config, tokenizer).
inline constexpr const char* kSourceModelDirName = "source-model";

// <run_dir>/step-N
fs::path checkpoint_dir(const fs::path& run_dir, int64_t step);

// Every step-N directory in run_dir (complete or not, step-N.tmp and step-N.deleting included), for the output guard.
std::vector<fs::path> run_checkpoint_dirs(const fs::path& run_dir);
// Whether a name directly inside a run directory is the run's own: step-N, step-N.tmp, step-N.deleting,
// source-model, the lock.
bool is_run_file_name(const std::string& name);

// Writes <run_dir>/step-<step> (replacing an existing one of that step, with a warning). Tensors may live on
// any device (copied to the host one at a time). Refuses (Error, nothing left behind) when a float tensor holds
// a NaN or infinity. Returns the checkpoint directory.
fs::path save_checkpoint(const fs::path& run_dir, int64_t step, std::span<const Parameter> parameters,
                         const Optimizer& optimizer, const nlohmann::json& trainer_state);

// The same with explicit tensor lists (what the overload above builds from parameters and optimizer).
fs::path save_checkpoint(const fs::path& run_dir, int64_t step, std::span<const NamedTensor> model_tensors,
                         std::span<const NamedTensor> optimizer_tensors, const nlohmann::json& optimizer_description,
                         const nlohmann::json& trainer_state);

struct CheckpointInfo {
  fs::path dir;
  int64_t step = 0;
};

// The newest complete checkpoint in run_dir (nullopt when there is none). Ignores *.tmp directories and
// anything not named step-N; checks each candidate from the newest down (manifest, sizes, checksums at
// VerifyLevel::Checksums, trainer_state.json's step) and logs a warning naming why one is skipped.
std::optional<CheckpointInfo> latest_checkpoint(const fs::path& run_dir, VerifyLevel level = VerifyLevel::Checksums);

// Deletes old checkpoints so that at most `keep` (>= 1) step-N directories remain at or below the newest
// complete one (which is never deleted; newer incomplete ones are left alone and logged), plus leftover
// step-M.tmp directories with M <= that step and every step-M.deleting (a deletion a crash interrupted). Each
// step-N is renamed to step-N.deleting before anything in it is removed. `also_keep` (e.g. the step with the best
// evaluation loss, --save-best) is never deleted either: the `keep` newest stay, and that one besides when it is older.
// Returns the deleted paths.
std::vector<fs::path> prune_checkpoints(const fs::path& run_dir, int keep, VerifyLevel level = VerifyLevel::Checksums,
                                        std::optional<int64_t> also_keep = std::nullopt);

// Loads `dir` into the model's parameters (master weights) and the optimizer (state and step counter) and
// returns trainer_state.json. Validates everything first and throws Error naming the file and the problem:
// missing files, manifest/size/checksum mismatch (checksums skipped at VerifyLevel::Sizes, e.g. right after
// latest_checkpoint verified them), bad JSON, wrong optimizer kind, missing, extra, mis-typed or mis-shaped
// tensors. Nothing is modified unless every check passes.
// OptimizerScope::Shard: `optimizer` holds the state of some of the parameters (one rank's shard of a data-parallel
// run, train/dist/data_parallel.h); the file's state of the others is accepted and left alone.
enum class OptimizerScope { Whole, Shard };
nlohmann::json load_checkpoint(const fs::path& dir, std::span<Parameter> parameters, Optimizer& optimizer,
                               VerifyLevel level = VerifyLevel::Checksums,
                               OptimizerScope scope = OptimizerScope::Whole);

// Lower level: reads trainer_state.json.
nlohmann::json read_trainer_state(const fs::path& dir);

// Rng::State as JSON (four 16-digit hex strings, safe in any JSON reader) and back; Error names `what`.
nlohmann::json rng_state_to_json(const Rng::State& state);
Rng::State rng_state_from_json(const nlohmann::json& json, const std::string& what);

}  // namespace nvfp4lm
