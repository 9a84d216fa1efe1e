// The run directory (--output) of `nvfp4lm train`: its lock, the guards on every output of the run, the resume
// point, the copy of the model's small files, the metrics file and the checkpoints. Trainer (trainer.h) owns one;
// everything here is about files, nothing about training.
//
// Layout: step-N/ (train/checkpoint.h), source-model/ (config, generation config, tokenizer files and, when the run
// used another chat template than the tokenizer's, chat_template.jinja: what an export from a checkpoint needs),
// metrics.jsonl (unless --metrics names another file), .nvfp4lm.lock.
//
// Outputs are checked before the (long) load and training. The metrics file and the memory report replace an
// existing file only when it is the run's own (the default metrics.jsonl, or on --resume the file the resumed run
// wrote under that flag) or with --overwrite, and then only a regular file; never an input, a checkpoint or the
// run's copy of the model's files, whatever --overwrite says.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/tensor.h"
#include "train/checkpoint.h"
#include "train/metrics.h"
#include "train/optim/optimizer.h"

namespace nvfp4lm {

// What --resume continues from.
struct ResumePoint {
  CheckpointInfo checkpoint;
  nlohmann::json state;  // its trainer_state.json
  // The reports the resumed run wrote (--metrics, --memory-report as saved; "" for the defaults).
  std::string metrics, memory_report;
};

// What an export from a checkpoint needs besides the weights, copied into the run once.
struct SourceModelFiles {
  nlohmann::json config;
  std::optional<nlohmann::json> generation_config;
  fs::path tokenizer_dir;                    // its tokenizer files travel with exports
  std::optional<std::string> chat_template;  // trained with another template than the tokenizer's own
};

// What --resume continues from in `dir` (RunDirectory::resume_point; also read by the ranks of a data-parallel run
// other than rank 0, which hold no lock on the directory).
ResumePoint read_resume_point(const fs::path& dir);

class RunDirectory {
 public:
  // Checks that `dir` is not, and does not lie in, what the run reads, then locks it for the life of this object
  // (one process per run: two trainings into one --output would overwrite each other's checkpoints and metrics).
  // The directory is created when missing.
  RunDirectory(fs::path dir, const std::vector<GuardedInput>& reads);
  ~RunDirectory();
  RunDirectory(const RunDirectory&) = delete;
  RunDirectory& operator=(const RunDirectory&) = delete;

  const fs::path& path() const { return dir_; }
  // The set-up failed: unlock, and remove the directory again when this object created it and it is still empty.
  void abandon();

  // --resume: the newest complete checkpoint and its state; Error when there is none or it was not written by
  // `nvfp4lm train`.
  ResumePoint resume_point() const;
  // A new run takes an empty directory (or a new one). Error naming what is there otherwise: checkpoints (--resume
  // continues them; nothing is deleted), anything this program does not write, or the copy of the model's files and
  // metrics.jsonl of an earlier run that saved no checkpoint (replaced with `overwrite`, else an Error).
  void check_new_run(bool overwrite);
  // Checks the run's reports (metrics: "" for RUN_DIR/metrics.jsonl; memory_report: "" for none) against the
  // rules above. `resumed`: the run continued, whose own reports may be replaced.
  void check_reports(const std::string& metrics, const std::string& memory_report, bool overwrite,
                     const std::vector<GuardedInput>& reads, const ResumePoint* resumed);
  const fs::path& metrics_path() const { return metrics_path_; }
  // What no output of the run may be or lie in: `reads`, the directory itself (outputs may lie inside it), its
  // copy of the model's files and its checkpoints.
  std::vector<GuardedInput> protected_paths(const std::vector<GuardedInput>& reads) const;

  // Writes the copy of the model's files when the run has none yet, and opens the metrics file (keeping the lines
  // up to `resumed_from` of a resumed run's file).
  void prepare(const SourceModelFiles& source, std::optional<int64_t> resumed_from);
  // The directory's copy of the model's files when it exists, else `fallback` (a run before prepare()).
  fs::path source_model_dir(const fs::path& fallback) const;
  MetricsFile& metrics() { return *metrics_file_; }
  const MetricsFile& metrics() const { return *metrics_file_; }

  // Saves step `step` (masters, optimizer state and Optimizer::describe(), trainer state) and prunes to the `keep`
  // newest, also keeping `also_keep` (--save-best). Returns the checkpoint's directory.
  fs::path save_checkpoint(int64_t step, std::span<const NamedTensor> masters,
                           std::span<const NamedTensor> optimizer_state, const nlohmann::json& optimizer_description,
                           const nlohmann::json& state, int keep, std::optional<int64_t> also_keep);
  // The checkpoints on disk at or below `step`, newest last, at most `keep`.
  std::vector<fs::path> newest_checkpoints(int64_t step, int keep) const;
  // Writes --memory-report (checked by check_reports).
  void write_memory_report(const nlohmann::json& report) const;
  const std::optional<fs::path>& memory_report_path() const { return memory_report_path_; }

 private:
  fs::path dir_;
  std::unique_ptr<DirectoryLock> lock_;
  fs::path metrics_path_;
  bool replace_metrics_ = false;
  bool replace_source_copy_ = false;  // a new run with --overwrite over an earlier run's copy of the model's files
  std::optional<fs::path> memory_report_path_;
  bool replace_memory_report_ = false;
  std::unique_ptr<MetricsFile> metrics_file_;
};

}  // namespace nvfp4lm
