// File-system helpers shared by every writer: outputs go to a temporary name in the same directory, are
// fsynced and renamed, so a crash never leaves a half-written file under the final name; existing outputs are
// only replaced when the user asked (--overwrite).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace nvfp4lm {

namespace fs = std::filesystem;

// Throws Error if `path` exists and `overwrite` is false (message names the flag).
void check_output_path(const fs::path& path, bool overwrite);

// "<path>.tmp-<pid>": a sibling temporary name for `path` (same directory, so rename is atomic).
fs::path temporary_sibling(const fs::path& path);

// fsync a file or a directory by path; throws Error on failure.
void fsync_path(const fs::path& path);

// Renames tmp -> final (replacing an existing file, or an existing directory after moving it aside and
// deleting it), then fsyncs the parent directory.
void commit_rename(const fs::path& tmp, const fs::path& final_path);

// Writes `contents` atomically (temporary + fsync + rename).
void write_file_atomic(const fs::path& path, std::string_view contents);

// Reads a whole (small) text file; Error names the path when it cannot be read.
std::string read_text_file(const fs::path& path);

// The local time as "YYYYmmdd-HHMMSS", for default output directory names (runs/train-..., demo-run/run-...).
std::string local_time_stamp();

}  // namespace nvfp4lm
