// File-system helpers shared by every command: where an output may go (guard_output), locks on run directories,
// reading inputs safely, fresh and scratch directories. How an output is written and put in place (temporaries,
// the atomic publishing step, --overwrite) is core/publish.h.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/publish.h"

namespace nvfp4lm {

namespace fs = std::filesystem;

// ---- the output guard ----------------------------------------------------------------------------------------
// A path a command reads (a model, tokenizer, data file, checkpoint), for guard_output.
struct GuardedInput {
  fs::path path;
  std::string what;               // "the source model", "--data": for messages
  bool may_hold_outputs = false;  // a run directory: outputs may lie inside it, but not be it or contain it
};

// The one rule for everything a command writes, checked before any work: `output` (called `what` in messages,
// e.g. "--metrics") may not be, contain or (unless may_hold_outputs) lie inside any of `inputs`, whether or not
// --overwrite was given, and may not exist unless `overwrite` and it is replaceable by an output of `kind`
// (core/publish.h check_replaceable: a regular file for a file). Paths are compared as real paths (symlinks and
// ".." resolved, the missing tail of a new path taken as written). An empty output is an Error too, and so is
// one whose nearest existing directory cannot be written (a read-only file system), found before any work.
// The publishing step checks existence again, atomically (core/publish.h): this check only fails early.
void guard_output(const fs::path& output, std::string_view what, const std::vector<GuardedInput>& inputs,
                  bool overwrite, OutputKind kind);
// The same rules but the existence check, for a directory a command works in and keeps, which may exist (a run
// directory: `train --output`).
void guard_output_location(const fs::path& output, std::string_view what, const std::vector<GuardedInput>& inputs);

// The real path of `path` as far as it exists, the rest appended lexically.
fs::path real_path(const fs::path& path);
// Whether real path `inner` is `outer` or lies under it.
bool is_within(const fs::path& inner, const fs::path& outer);

// ---- locks ---------------------------------------------------------------------------------------------------
// An exclusive lock on a directory for the life of this object (flock on DIR/.nvfp4lm.lock, which the kernel
// releases when the process dies, however it dies): a second process gets Error "DIR is in use by pid N".
class DirectoryLock {
 public:
  // Creates `dir` (and its parents) when missing.
  explicit DirectoryLock(const fs::path& dir);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;
  // True when this lock created the directory (the caller may remove it again if setting up fails).
  bool created_directory() const { return created_; }
  const fs::path& directory() const { return dir_; }
  // Unlocks, and removes the directory when this lock created it and it holds nothing but the lock file (or, in a
  // directory that was there, the lock file when this lock created it).
  void release_and_remove_if_unused();

 private:
  fs::path dir_;
  int fd_ = -1;
  bool created_ = false;
  bool lock_file_created_ = false;
};
inline constexpr const char* kDirectoryLockFileName = ".nvfp4lm.lock";

// Removes `dir` when it holds nothing but (at most) its lock file: a run directory nothing was written into. Anything
// else in it, or an error listing it, keeps it.
void remove_directory_if_unused(const fs::path& dir);

// fsync a file or a directory by path; throws Error on failure.
void fsync_path(const fs::path& path);

// Opens `path` read-only as a regular file and returns the descriptor (the caller closes it) and its size.
// Opened with O_NONBLOCK, then fstat'ed, so a FIFO, device or socket is refused instead of blocking the open
// or reading forever (/dev/zero); Error names the path, what it is, and a size above `max_bytes`.
struct InputFd {
  int fd = -1;
  uint64_t size = 0;
};
InputFd open_input_file(const fs::path& path, uint64_t max_bytes = UINT64_MAX);

// Config, header and state files are megabytes at most; 1 GiB only stops a wrong or hostile file early.
inline constexpr uint64_t kMaxTextFileBytes = uint64_t{1} << 30;

// Reads a whole text file (through open_input_file); Error names the path when it cannot be read or is larger
// than `max_bytes`.
std::string read_text_file(const fs::path& path, uint64_t max_bytes = kMaxTextFileBytes);

// The local time as "YYYYmmdd-HHMMSS", for default output directory names (runs/train-..., demo-run/run-...).
std::string local_time_stamp();

// Creates and returns a new, empty directory `base` (parents included), or `base-2`, `base-3`, ... when that name is
// taken. mkdir claims a name atomically, so commands started in the same second (a script's loop, two terminals)
// never share a default output directory named by local_time_stamp().
fs::path create_fresh_directory(const fs::path& base);

// A fresh directory "<parent>/nvfp4lm-<purpose>-<pid>-<n>" (parent: the system temp directory by default), removed
// with everything in it when the object dies: the models `bench infer --preset` and `parity` write for themselves.
class ScratchDirectory {
 public:
  explicit ScratchDirectory(std::string_view purpose, const fs::path& parent = {});
  ~ScratchDirectory();
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

}  // namespace nvfp4lm
