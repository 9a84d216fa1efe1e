#include "train/checkpoint.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <unordered_map>

#include "core/error.h"
#include "core/files.h"
#include "core/json_text.h"
#include "core/logging.h"
#include "io/safetensors_reader.h"
#include "io/safetensors_writer.h"

namespace nvfp4lm {
namespace {

using json = nlohmann::json;

constexpr const char* kTrainerStateFormat = "nvfp4lm-trainer-state";
constexpr const char* kTmpSuffix = ".tmp";
constexpr const char* kDeletingSuffix = ".deleting";

const std::vector<std::string>& checkpoint_files() {
  static const std::vector<std::string> files = {kModelFileName, kOptimizerFileName, kTrainerStateFileName};
  return files;
}

// Parses "step-N" (N decimal digits only); nullopt for anything else, *.tmp included.
std::optional<int64_t> parse_step_name(const std::string& name, const std::string& suffix = "") {
  const std::string prefix = "step-";
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  if (!suffix.empty() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) return std::nullopt;
  const char* begin = name.data() + prefix.size();
  const char* end = name.data() + name.size() - suffix.size();
  if (!std::all_of(begin, end, [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  int64_t step = 0;
  auto [ptr, ec] = std::from_chars(begin, end, step);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return step;
}

struct StepDir {
  fs::path path;
  int64_t step = 0;
};

// Directories of run_dir named step-N (or step-N<suffix>: ".tmp", ".deleting"), newest first.
std::vector<StepDir> list_step_dirs(const fs::path& run_dir, const std::string& suffix = "") {
  std::vector<StepDir> dirs;
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) return dirs;
  for (const fs::directory_entry& entry : fs::directory_iterator(run_dir, ec)) {
    if (!entry.is_directory(ec)) continue;
    if (auto step = parse_step_name(entry.path().filename().string(), suffix)) dirs.push_back({entry.path(), *step});
  }
  NVFP4LM_CHECK(!ec, "cannot list {}: {}", run_dir.string(), ec.message());
  std::sort(dirs.begin(), dirs.end(), [](const StepDir& a, const StepDir& b) {
    return a.step != b.step ? a.step > b.step : a.path.filename() < b.path.filename();
  });
  return dirs;
}

// Why `dir` (a step-N, step-N.tmp or step-N.deleting) is not provably a checkpoint directory this program wrote, or
// an empty string: it holds nothing but regular files named as a checkpoint's files (or their temporaries,
// core/publish.h), and, when `complete`, the checksum manifest written last. Anything else (a partial copy, another
// tool's output, a person's notes) is never deleted.
std::string not_ours_reason(const fs::path& dir, bool complete) {
  bool has_manifest = false;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code type_ec;
    if (!fs::is_regular_file(fs::symlink_status(it->path(), type_ec)))
      return fmt::format("it holds {}, which is not a regular file", name);
    has_manifest = has_manifest || name == kChecksumManifestName;
    auto is = [&](const std::string& file) { return name == file || name.starts_with(file + ".nvfp4lm-partial-"); };
    const bool known =
        is(kChecksumManifestName) || std::any_of(checkpoint_files().begin(), checkpoint_files().end(), is);
    if (!known) return fmt::format("it holds {}, which no checkpoint has", name);
  }
  if (ec) return fmt::format("it cannot be listed ({})", ec.message());
  if (complete && !has_manifest) return fmt::format("it has no {}, which every checkpoint has", kChecksumManifestName);
  return {};
}

// Deletes the checkpoint directory `dir` so that a crash at any moment leaves either all of it under its name or
// none: renamed to "<dir>.deleting" before anything inside is removed. Error when dir (`foreign`: not_ours_reason(dir,
// true), found by the caller) or a leftover "<dir>.deleting" is not provably a checkpoint of this program.
void delete_checkpoint_dir(const fs::path& dir, const std::string& foreign) {
  NVFP4LM_CHECK(foreign.empty(),
                "cannot delete {}: {}; it may not be a checkpoint of this program, so it is left "
                "alone: move it out of the run directory",
                dir.string(), foreign);
  const fs::path deleting = dir.string() + kDeletingSuffix;
  std::error_code ec;
  if (fs::exists(fs::symlink_status(deleting, ec))) {
    const std::string leftover = not_ours_reason(deleting, /*complete=*/false);
    NVFP4LM_CHECK(leftover.empty(), "cannot delete {}: {} is in the way and {}; move it out of the run directory",
                  dir.string(), deleting.string(), leftover);
    fs::remove_all(deleting, ec);
    NVFP4LM_CHECK(!ec, "cannot delete {}: {}", deleting.string(), ec.message());
  }
  NVFP4LM_CHECK(::rename(dir.c_str(), deleting.c_str()) == 0, "cannot delete old checkpoint {}: {}", dir.string(),
                std::strerror(errno));
  fs::remove_all(deleting, ec);
  NVFP4LM_CHECK(!ec, "cannot delete old checkpoint {} (now {}): {}", dir.string(), deleting.string(), ec.message());
}

// Index of the first NaN/inf in a contiguous CPU F32 or BF16 tensor, or -1 (other dtypes: -1).
int64_t first_non_finite(const Tensor& tensor) {
  const int64_t n = tensor.numel();
  if (tensor.dtype() == DType::F32) {
    const float* data = tensor.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(data[i])) return i;
    }
  } else if (tensor.dtype() == DType::BF16) {
    const uint16_t* data = tensor.data<uint16_t>();
    for (int64_t i = 0; i < n; ++i) {
      if ((data[i] & 0x7f80u) == 0x7f80u) return i;
    }
  }
  return -1;
}

void write_safetensors(const fs::path& path, std::span<const NamedTensor> tensors,
                       std::map<std::string, std::string> metadata) {
  std::vector<SafetensorsEntrySpec> specs;
  specs.reserve(tensors.size());
  for (const NamedTensor& entry : tensors) specs.push_back({entry.name, entry.tensor.dtype(), entry.tensor.shape()});
  SafetensorsWriter writer(path, std::move(specs), std::move(metadata));
  for (const NamedTensor& entry : tensors) {
    // Device tensors travel to the host one at a time, so the extra memory is one tensor.
    const Tensor host = (entry.tensor.device().is_cpu() ? entry.tensor : entry.tensor.to(Device::cpu())).contiguous();
    // DESIGN.md §7: a non-finite value never reaches a checkpoint (it would poison every resume).
    const int64_t bad = first_non_finite(host);
    NVFP4LM_CHECK(bad < 0, "refusing to write {}: tensor '{}' has a non-finite value at element {}", path.string(),
                  entry.name, bad);
    writer.write(entry.name, host);
  }
  writer.finish();
}

// Parses and checks trainer_state.json (format, version, step) without comparing it to a directory name.
json parse_trainer_state(const fs::path& path) {
  const json state = read_json_file(path);
  NVFP4LM_CHECK(state.is_object(), "{} must hold a JSON object, found {}", path.string(), state.type_name());
  NVFP4LM_CHECK(json_field_or(state, "format", std::string(), path.string()) == kTrainerStateFormat,
                "{}: \"format\" is not \"{}\"", path.string(), kTrainerStateFormat);
  NVFP4LM_CHECK(state.contains("format_version") && state["format_version"].is_number_integer(),
                "{}: \"format_version\" is missing", path.string());
  const int64_t version = state["format_version"].get<int64_t>();
  NVFP4LM_CHECK(version >= 1 && version <= kTrainerStateFormatVersion,
                "{}: format_version {} is not supported by this build (it reads 1..{}); use a newer nvfp4lm",
                path.string(), version, kTrainerStateFormatVersion);
  NVFP4LM_CHECK(state.contains("step") && state["step"].is_number_integer() && state["step"].get<int64_t>() >= 0,
                "{}: \"step\" is missing or not a non-negative integer", path.string());
  return state;
}

// The reason `dir` is not a usable checkpoint of `step`, or an empty string.
std::string checkpoint_problem(const fs::path& dir, int64_t step, VerifyLevel level) {
  std::string problem = verify_checksum_manifest(dir, checkpoint_files(), level);
  if (!problem.empty()) return problem;
  try {
    const json state = parse_trainer_state(dir / kTrainerStateFileName);
    if (state["step"].get<int64_t>() != step) {
      return fmt::format("{} records step {}, but the directory is step-{}", (dir / kTrainerStateFileName).string(),
                         state["step"].get<int64_t>(), step);
    }
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

// Checks that `file` holds exactly the tensors of `destinations`, with their dtypes and shapes.
// `foreign`: names the run does not load here but accepts (another rank's optimizer state); none when empty.
void check_tensors_match(const SafetensorsFile& file, std::span<const NamedTensor> destinations,
                         const std::function<bool(const std::string&)>& foreign = {}) {
  const std::string path = file.path().string();
  for (const NamedTensor& destination : destinations) {
    const SafetensorsEntry* entry = file.find(destination.name);
    NVFP4LM_CHECK(entry != nullptr,
                  "{}: tensor '{}' is missing (the checkpoint was written for another model or "
                  "optimizer)",
                  path, destination.name);
    NVFP4LM_CHECK(entry->dtype == destination.tensor.dtype(),
                  "{}: tensor '{}' is {} in the checkpoint but {} in this run (was the checkpoint written with another "
                  "master-weight dtype?)",
                  path, destination.name, dtype_name(entry->dtype), dtype_name(destination.tensor.dtype()));
    NVFP4LM_CHECK(entry->shape == destination.tensor.shape(),
                  "{}: tensor '{}' has shape {} in the checkpoint but {} "
                  "in this run",
                  path, destination.name, entry->shape.str(), destination.tensor.shape().str());
  }
  if (file.entries().size() != destinations.size()) {
    std::unordered_map<std::string, int> wanted;
    for (const NamedTensor& destination : destinations) wanted[destination.name] = 1;
    size_t foreign_entries = 0;
    for (const SafetensorsEntry& entry : file.entries()) {
      if (!wanted.count(entry.name) && foreign && foreign(entry.name)) {
        ++foreign_entries;
        continue;
      }
      NVFP4LM_CHECK(wanted.count(entry.name),
                    "{}: tensor '{}' has no counterpart in this run (the checkpoint was "
                    "written for another model or optimizer)",
                    path, entry.name);
    }
    if (file.entries().size() == destinations.size() + foreign_entries) return;
    NVFP4LM_FAIL("{}: {} tensors, this run expects {}", path, file.entries().size(), destinations.size());
  }
}

void copy_tensors(const SafetensorsFile& file, std::span<const NamedTensor> destinations) {
  for (const NamedTensor& destination : destinations) {
    const SafetensorsEntry& entry = file.at(destination.name);
    Tensor target = destination.tensor;  // a view: copying into it writes the caller's storage
    target.copy_from(file.tensor(entry));
    file.drop_pages(entry);
  }
}

json optimizer_description(const SafetensorsFile& file) {
  const std::string path = file.path().string();
  auto it = file.metadata().find(kOptimizerMetadataKey);
  NVFP4LM_CHECK(it != file.metadata().end(), "{}: metadata has no \"{}\" entry; not an nvfp4lm optimizer state", path,
                kOptimizerMetadataKey);
  const json description = parse_json(it->second, fmt::format("{}: metadata \"{}\"", path, kOptimizerMetadataKey));
  NVFP4LM_CHECK(description.is_object() && description.contains("kind") && description["kind"].is_string() &&
                    description.contains("step") && description["step"].is_number_integer() &&
                    description["step"].get<int64_t>() >= 0,
                "{}: metadata \"{}\" needs \"kind\" (string) and \"step\" (non-negative integer)", path,
                kOptimizerMetadataKey);
  return description;
}

}  // namespace

fs::path checkpoint_dir(const fs::path& run_dir, int64_t step) { return run_dir / fmt::format("step-{}", step); }

fs::path save_checkpoint(const fs::path& run_dir, int64_t step, std::span<const Parameter> parameters,
                         const Optimizer& optimizer, const json& trainer_state) {
  std::vector<NamedTensor> model_tensors;
  model_tensors.reserve(parameters.size());
  for (const Parameter& parameter : parameters) model_tensors.push_back({parameter.name, parameter.value});
  return save_checkpoint(run_dir, step, model_tensors, optimizer.state_tensors(), optimizer.describe(), trainer_state);
}

fs::path save_checkpoint(const fs::path& run_dir, int64_t step, std::span<const NamedTensor> model_tensors,
                         std::span<const NamedTensor> optimizer_tensors, const json& optimizer_description,
                         const json& trainer_state) {
  NVFP4LM_ASSERT(step >= 0, "checkpoint step {}", step);
  NVFP4LM_ASSERT(trainer_state.is_object(), "trainer state must be a JSON object, got {}", trainer_state.type_name());
  NVFP4LM_ASSERT(!trainer_state.contains("step") || trainer_state["step"] == step,
                 "trainer state says step {}, saving step {}", json_excerpt(trainer_state["step"]), step);
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  NVFP4LM_CHECK(!ec, "cannot create run directory {}: {}", run_dir.string(), ec.message());

  const fs::path final_dir = checkpoint_dir(run_dir, step);
  const fs::path tmp_dir = final_dir.string() + kTmpSuffix;
  if (fs::exists(fs::symlink_status(tmp_dir, ec))) {
    const std::string foreign = not_ours_reason(tmp_dir, /*complete=*/false);
    NVFP4LM_CHECK(foreign.empty(),
                  "cannot write checkpoint {}: {} is in the way and {}; it may not be this program's, so it is left "
                  "alone: move it out of the run directory",
                  final_dir.string(), tmp_dir.string(), foreign);
    log::warn("removing {}, left by an interrupted checkpoint write", tmp_dir.string());
    fs::remove_all(tmp_dir, ec);
    NVFP4LM_CHECK(!ec, "cannot remove {}: {}", tmp_dir.string(), ec.message());
  }
  fs::create_directory(tmp_dir, ec);
  NVFP4LM_CHECK(!ec, "cannot create {}: {}", tmp_dir.string(), ec.message());

  try {
    write_safetensors(tmp_dir / kModelFileName, model_tensors, {{"format", "pt"}});
    write_safetensors(tmp_dir / kOptimizerFileName, optimizer_tensors,
                      {{"format", "pt"}, {kOptimizerMetadataKey, optimizer_description.dump()}});
    json state = trainer_state;
    state["format"] = kTrainerStateFormat;
    state["format_version"] = kTrainerStateFormatVersion;
    state["step"] = step;
    write_file_atomic(tmp_dir / kTrainerStateFileName, state.dump(2) + "\n", /*overwrite=*/false);
    write_checksum_manifest(tmp_dir, checkpoint_files());
    fsync_path(tmp_dir);
  } catch (...) {
    fs::remove_all(tmp_dir, ec);  // best effort; a leftover would be ignored and replaced anyway
    throw;
  }

  if (fs::exists(final_dir, ec)) {
    log::warn("replacing existing checkpoint {}", final_dir.string());
    delete_checkpoint_dir(final_dir, not_ours_reason(final_dir, /*complete=*/true));
  }
  publish(tmp_dir, final_dir, OutputKind::Directory, /*overwrite=*/false, "checkpoint");  // fsyncs run_dir
  log::info("checkpoint saved: {}", final_dir.string());
  return final_dir;
}

std::vector<fs::path> run_checkpoint_dirs(const fs::path& run_dir) {
  std::vector<fs::path> dirs;
  for (const StepDir& dir : list_step_dirs(run_dir)) dirs.push_back(dir.path);
  for (const StepDir& dir : list_step_dirs(run_dir, kTmpSuffix)) dirs.push_back(dir.path);
  for (const StepDir& dir : list_step_dirs(run_dir, kDeletingSuffix)) dirs.push_back(dir.path);
  return dirs;
}

bool is_run_file_name(const std::string& name) {
  return parse_step_name(name).has_value() || parse_step_name(name, kTmpSuffix).has_value() ||
         parse_step_name(name, kDeletingSuffix).has_value() || name == kSourceModelDirName ||
         name == kDirectoryLockFileName;
}

std::optional<CheckpointInfo> latest_checkpoint(const fs::path& run_dir, VerifyLevel level) {
  for (const StepDir& tmp : list_step_dirs(run_dir, kTmpSuffix)) {
    log::info("ignoring {}: an unfinished checkpoint write", tmp.path.string());
  }
  for (const StepDir& candidate : list_step_dirs(run_dir)) {
    const std::string problem = checkpoint_problem(candidate.path, candidate.step, level);
    if (problem.empty()) return CheckpointInfo{candidate.path, candidate.step};
    log::warn("skipping checkpoint {}: {}", candidate.path.string(), problem);
  }
  return std::nullopt;
}

std::vector<fs::path> prune_checkpoints(const fs::path& run_dir, int keep, VerifyLevel level,
                                        std::optional<int64_t> also_keep) {
  NVFP4LM_CHECK(keep >= 1, "the number of checkpoints to keep must be at least 1 (got {})", keep);
  std::vector<fs::path> deleted;
  const std::optional<CheckpointInfo> newest = latest_checkpoint(run_dir, level);
  if (!newest) {
    log::warn("not pruning {}: it has no complete checkpoint", run_dir.string());
    return deleted;
  }
  // Only what provably is a checkpoint of this program is deleted; anything else is named once and kept.
  auto remove = [&](const fs::path& path) {
    const std::string foreign = not_ours_reason(path, /*complete=*/true);
    if (!foreign.empty()) {
      log::warn("keeping {}: {}; it may not be a checkpoint of this program", path.string(), foreign);
      return;
    }
    delete_checkpoint_dir(path, foreign);
    deleted.push_back(path);
  };
  auto remove_leftover = [&](const fs::path& path, const char* what, bool listed) {
    const std::string foreign = not_ours_reason(path, /*complete=*/false);
    if (!foreign.empty()) {
      log::warn("keeping {}: {}; it may not be this program's", path.string(), foreign);
      return;
    }
    std::error_code ec;
    fs::remove_all(path, ec);
    NVFP4LM_CHECK(!ec, "cannot delete {}: {}", path.string(), ec.message());
    log::info("removed {}, {}", path.string(), what);
    if (listed) deleted.push_back(path);
  };
  for (const StepDir& interrupted : list_step_dirs(run_dir, kDeletingSuffix))
    remove_leftover(interrupted.path, "a deletion an earlier run did not finish", false);
  int kept = 0;
  bool past_newest = false;
  for (const StepDir& dir : list_step_dirs(run_dir)) {
    past_newest = past_newest || dir.path == newest->dir;
    if (!past_newest) {
      log::warn("keeping {}: newer than the newest complete checkpoint, but not complete", dir.path.string());
    } else if (kept < keep) {
      ++kept;
    } else if (also_keep && dir.step == *also_keep) {
      continue;
    } else {
      remove(dir.path);
    }
  }
  for (const StepDir& tmp : list_step_dirs(run_dir, kTmpSuffix)) {
    if (tmp.step <= newest->step) remove_leftover(tmp.path, "an unfinished checkpoint write", true);
  }
  return deleted;
}

json read_trainer_state(const fs::path& dir) {
  const fs::path path = dir / kTrainerStateFileName;
  std::error_code ec;
  NVFP4LM_CHECK(fs::is_regular_file(path, ec), "checkpoint {}: {} is missing", dir.string(), kTrainerStateFileName);
  return parse_trainer_state(path);
}

json load_checkpoint(const fs::path& dir, std::span<Parameter> parameters, Optimizer& optimizer, VerifyLevel level,
                     OptimizerScope scope) {
  std::error_code ec;
  NVFP4LM_CHECK(fs::is_directory(dir, ec), "checkpoint {} does not exist or is not a directory", dir.string());
  const std::string problem = verify_checksum_manifest(dir, checkpoint_files(), level);
  NVFP4LM_CHECK(problem.empty(), "checkpoint {} is incomplete or corrupted: {}", dir.string(), problem);

  // Validate everything before modifying anything.
  json state = read_trainer_state(dir);
  if (auto step = parse_step_name(dir.filename().string())) {
    NVFP4LM_CHECK(state["step"].get<int64_t>() == *step, "{}: records step {}, but the directory is step-{}",
                  (dir / kTrainerStateFileName).string(), state["step"].get<int64_t>(), *step);
  }
  std::vector<NamedTensor> model_tensors;
  model_tensors.reserve(parameters.size());
  for (const Parameter& parameter : parameters) model_tensors.push_back({parameter.name, parameter.value});
  std::shared_ptr<SafetensorsFile> model_file = SafetensorsFile::open(dir / kModelFileName);
  check_tensors_match(*model_file, model_tensors);

  std::shared_ptr<SafetensorsFile> optimizer_file = SafetensorsFile::open(dir / kOptimizerFileName);
  const json description = optimizer_description(*optimizer_file);
  const std::string kind = description["kind"].get<std::string>();
  NVFP4LM_CHECK(kind == optimizer.kind(),
                "{}: the checkpoint's optimizer is {}, this run uses {}; resume with the "
                "same optimizer",
                optimizer_file->path().string(), kind, optimizer.kind());
  const std::vector<NamedTensor> optimizer_tensors = optimizer.state_tensors();
  // A shard's optimizer leaves the other parameters' state ("<parameter name>.<state>") to their ranks.
  std::function<bool(const std::string&)> foreign;
  if (scope == OptimizerScope::Shard) {
    foreign = [&](const std::string& name) {
      for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1))
        if (model_file->find(name.substr(0, dot)) != nullptr) return true;
      return false;
    };
  }
  check_tensors_match(*optimizer_file, optimizer_tensors, foreign);
  const json current = optimizer.describe();
  for (const auto& [key, value] : current.items()) {
    if (key == "step" || key == "kind") continue;
    if (!description.contains(key) || description[key] != value) {
      // A different block size would already have failed on the absmax shapes above.
      log::warn("{}: optimizer setting {} was {} when saved, is {} now", optimizer_file->path().string(), key,
                description.contains(key) ? json_excerpt(description[key]) : "(absent)", json_excerpt(value));
    }
  }

  copy_tensors(*model_file, model_tensors);
  copy_tensors(*optimizer_file, optimizer_tensors);
  optimizer.set_step_count(description["step"].get<int64_t>());
  return state;
}

json rng_state_to_json(const Rng::State& state) {
  json words = json::array();
  for (uint64_t word : state) words.push_back(checksum_hex(word));
  return {{"xoshiro256**", words}};
}

Rng::State rng_state_from_json(const json& value, const std::string& what) {
  NVFP4LM_CHECK(value.is_object() && value.contains("xoshiro256**") && value["xoshiro256**"].is_array() &&
                    value["xoshiro256**"].size() == 4,
                "{}: RNG state must be {{\"xoshiro256**\": [four hex strings]}}", what);
  Rng::State state{};
  for (size_t i = 0; i < 4; ++i) {
    const json& word = value["xoshiro256**"][i];
    std::optional<uint64_t> parsed = word.is_string() ? parse_checksum_hex(word.get<std::string>()) : std::nullopt;
    NVFP4LM_CHECK(parsed.has_value(), "{}: RNG state word {} is not 16 hex digits", what, i);
    state[i] = *parsed;
  }
  return state;
}

}  // namespace nvfp4lm
