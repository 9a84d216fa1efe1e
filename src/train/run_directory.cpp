// See run_directory.h.
#include "train/run_directory.h"

#include <algorithm>

#include "core/error.h"
#include "core/json_text.h"
#include "core/publish.h"
#include "io/model_files.h"
#include "train/export.h"

namespace nvfp4lm {

using json = nlohmann::json;

RunDirectory::RunDirectory(fs::path dir, const std::vector<GuardedInput>& reads) : dir_(std::move(dir)) {
  NVFP4LM_CHECK(!dir_.empty(), "--output is empty: name the run directory");
  // The run directory may exist (a run to resume, an empty directory) but must not be or hold what is read.
  guard_output_location(dir_, "--output", reads);
  lock_ = std::make_unique<DirectoryLock>(dir_);
  metrics_path_ = dir_ / "metrics.jsonl";
}

RunDirectory::~RunDirectory() = default;

void RunDirectory::abandon() {
  metrics_file_.reset();
  if (lock_) lock_->release_and_remove_if_unused();
}

ResumePoint RunDirectory::resume_point() const { return read_resume_point(dir_); }

ResumePoint read_resume_point(const fs::path& dir) {
  std::error_code ec;
  NVFP4LM_CHECK(fs::is_directory(dir, ec), "--resume: the run directory {} does not exist (name it with --output)",
                dir.string());
  const std::optional<CheckpointInfo> checkpoint = latest_checkpoint(dir);
  NVFP4LM_CHECK(checkpoint.has_value(),
                "--resume: {} holds no complete checkpoint (step-N directories that verify); start a new run without "
                "--resume",
                dir.string());
  ResumePoint point{*checkpoint, read_trainer_state(checkpoint->dir), {}, {}};
  NVFP4LM_CHECK(point.state.contains("config"),
                "{}: trainer_state.json has no \"config\"; it was not written by `nvfp4lm train` and cannot be resumed",
                checkpoint->dir.string());
  const json& saved = point.state["config"];
  auto saved_path = [&](const char* key) {
    return saved.is_object() && saved.contains(key) && saved[key].is_string() ? saved[key].get<std::string>()
                                                                              : std::string();
  };
  point.metrics = saved_path("metrics");
  point.memory_report = saved_path("memory_report");
  return point;
}

void RunDirectory::check_new_run(bool overwrite) {
  const std::optional<CheckpointInfo> existing = latest_checkpoint(dir_, VerifyLevel::Sizes);
  NVFP4LM_CHECK(!existing,
                "{} already holds checkpoints (newest: {}); pass --resume to continue that run, or choose another "
                "--output",
                dir_.string(), existing ? existing->dir.filename().string() : "");
  // What is there, by whose it is: this run's lock; an earlier run's files; checkpoint names (none complete, since
  // latest_checkpoint found none); everything else.
  std::vector<std::string> earlier_run, checkpoints, foreign;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name == kDirectoryLockFileName) continue;
    if (name == kSourceModelDirName || name == "metrics.jsonl")
      earlier_run.push_back(name);
    else if (is_run_file_name(name))
      checkpoints.push_back(name);
    else
      foreign.push_back(name);
  }
  NVFP4LM_CHECK(!ec, "cannot list the run directory {}: {}", dir_.string(), ec.message());
  auto listed = [](std::vector<std::string> names) {
    std::sort(names.begin(), names.end());
    std::string text;
    for (size_t i = 0; i < names.size() && i < 5; ++i) text += (i ? ", " : "") + names[i];
    return names.size() > 5 ? fmt::format("{} and {} more", text, names.size() - 5) : text;
  };
  NVFP4LM_CHECK(foreign.empty(),
                "--output {} is not empty and not a run directory of nvfp4lm: it holds {}; a new run takes an empty "
                "or new directory (nothing in it is replaced or deleted): choose another --output",
                dir_.string(), listed(foreign));
  NVFP4LM_CHECK(checkpoints.empty(),
                "--output {} holds {}, none of them a complete checkpoint; a new run deletes nothing it did not make: "
                "move them away, or choose another --output",
                dir_.string(), listed(checkpoints));
  NVFP4LM_CHECK(earlier_run.empty() || overwrite,
                "--output {} holds {} of an earlier run that saved no checkpoint; pass --overwrite to replace them, "
                "or choose another --output",
                dir_.string(), listed(earlier_run));
  replace_source_copy_ = !earlier_run.empty();
}

void RunDirectory::check_reports(const std::string& metrics, const std::string& memory_report, bool overwrite,
                                 const std::vector<GuardedInput>& reads, const ResumePoint* resumed) {
  // Whether the report `path` is the run's own: RUN_DIR/metrics.jsonl, or on --resume the file the resumed run
  // wrote under that flag (compared as real paths).
  auto is_run_report = [&](const fs::path& path, const std::string& resumed_path) {
    const fs::path real = real_path(path);
    if (real == real_path(dir_ / "metrics.jsonl")) return true;
    return resumed != nullptr && !resumed_path.empty() && real == real_path(resumed_path);
  };
  guard_output_location(dir_, "--output", reads);  // a resumed run's saved paths
  metrics_path_ = metrics.empty() ? dir_ / "metrics.jsonl" : fs::path(metrics);
  replace_metrics_ = overwrite || is_run_report(metrics_path_, resumed ? resumed->metrics : "");
  guard_run_output(metrics_path_, metrics.empty() ? "the metrics file" : "--metrics", protected_paths(reads),
                   replace_metrics_, OutputKind::File);
  memory_report_path_.reset();
  if (memory_report.empty()) return;
  memory_report_path_ = memory_report;
  replace_memory_report_ = overwrite || is_run_report(memory_report, resumed ? resumed->memory_report : "");
  std::vector<GuardedInput> protect = protected_paths(reads);
  protect.push_back({metrics_path_, "the metrics file"});
  guard_run_output(memory_report, "--memory-report", protect, replace_memory_report_, OutputKind::File);
}

std::vector<GuardedInput> RunDirectory::protected_paths(const std::vector<GuardedInput>& reads) const {
  std::vector<GuardedInput> paths = reads;
  paths.push_back({dir_, "the run directory", /*may_hold_outputs=*/true});
  paths.push_back({dir_ / kSourceModelDirName, "the run's copy of the source model's files"});
  for (const fs::path& checkpoint : run_checkpoint_dirs(dir_)) paths.push_back({checkpoint, "the run's checkpoint"});
  return paths;
}

void RunDirectory::prepare(const SourceModelFiles& source, std::optional<int64_t> resumed_from) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  NVFP4LM_CHECK(!ec, "cannot create the run directory {}: {}", dir_.string(), ec.message());
  // The model's small files, once per run, for exports from checkpoints (written aside, then renamed).
  const fs::path copy = dir_ / kSourceModelDirName;
  if (replace_source_copy_ || !fs::exists(copy, ec)) {
    StagedDirectory staged(copy);
    write_file_atomic(staged.path() / "config.json", source.config.dump(2) + "\n", /*overwrite=*/false);
    if (source.generation_config)
      write_file_atomic(staged.path() / "generation_config.json", source.generation_config->dump(2) + "\n",
                        /*overwrite=*/false);
    for (const fs::path& file : tokenizer_side_files(source.tokenizer_dir)) {
      fs::copy_file(file, staged.path() / file.filename(), fs::copy_options::overwrite_existing, ec);
      NVFP4LM_CHECK(!ec, "cannot copy {} into {}: {}", file.string(), staged.path().string(), ec.message());
    }
    // Trained with another template than the tokenizer's own: exports carry it as chat_template.jinja (which
    // transformers, vLLM and this program prefer to tokenizer_config.json's), so the model is asked as it was trained.
    if (source.chat_template)
      write_file_atomic(staged.path() / "chat_template.jinja", *source.chat_template, /*overwrite=*/true);
    staged.publish(/*overwrite=*/replace_source_copy_, "the run's copy of the model's files");
  }
  metrics_file_ = std::make_unique<MetricsFile>(metrics_path_, resumed_from ? *resumed_from : -1, replace_metrics_);
}

fs::path RunDirectory::source_model_dir(const fs::path& fallback) const {
  std::error_code ec;
  const fs::path copy = dir_ / kSourceModelDirName;
  return fs::is_directory(copy, ec) ? copy : fallback;
}

fs::path RunDirectory::save_checkpoint(int64_t step, std::span<const NamedTensor> masters,
                                       std::span<const NamedTensor> optimizer_state, const json& optimizer_description,
                                       const json& state, int keep, std::optional<int64_t> also_keep) {
  const fs::path dir = ::nvfp4lm::save_checkpoint(dir_, step, masters, optimizer_state, optimizer_description, state);
  prune_checkpoints(dir_, keep, VerifyLevel::Sizes, also_keep);
  return dir;
}

std::vector<fs::path> RunDirectory::newest_checkpoints(int64_t step, int keep) const {
  std::vector<fs::path> newest;
  for (int64_t s = step; s >= 0 && static_cast<int>(newest.size()) < keep; --s) {
    std::error_code ec;
    if (fs::is_directory(checkpoint_dir(dir_, s), ec)) newest.insert(newest.begin(), checkpoint_dir(dir_, s));
  }
  return newest;
}

void RunDirectory::write_memory_report(const json& report) const {
  NVFP4LM_ASSERT(memory_report_path_.has_value(), "write_memory_report without --memory-report");
  // A directory that does not exist yet is made, as for --metrics and the exports: check_reports found the nearest
  // existing one writable before the first step (issue 52: the run trained, then failed here).
  const fs::path parent = memory_report_path_->parent_path();
  std::error_code ec;
  if (!parent.empty()) fs::create_directories(parent, ec);
  NVFP4LM_CHECK(!ec, "cannot create the directory {} of --memory-report: {}", parent.string(), ec.message());
  write_file_atomic(*memory_report_path_, report.dump(2) + "\n", replace_memory_report_);
}

}  // namespace nvfp4lm
