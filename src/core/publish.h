// Publishing an output: every file or directory a command writes is made under a temporary sibling name and put
// under its final name by one atomic step, the only step that may find something already there.
//
//  - Temporaries are "<final>.nvfp4lm-partial-<pid>-<16 hex digits>" (files and directories alike), a fresh random
//    name made with O_EXCL / mkdir (never a name something already has), in the output's own directory so the final
//    rename stays on one file system. A writer killed mid-write leaves one; the next writer of the same output
//    removes it (remove_stale_temporaries) only when it provably is one: the name has that form, its process is
//    gone, it belongs to this user, and a directory also holds the marker file ".nvfp4lm-partial" that names it.
//    Nothing a person made (model.old-20251206, model.tmp-1, a backup) is ever removed.
//  - Without overwrite the publishing step refuses an existing output, including one that appeared while this
//    process was writing (another process writing the same path): renameat2(RENAME_NOREPLACE), or link + unlink
//    for files where the file system refuses renameat2 flags. The loser gets Error "... already exists ..." and
//    removes only its own temporary.
//  - With overwrite the step replaces only what check_replaceable allows: a regular file for a file output; for a
//    directory output a directory nvfp4lm could have written (empty, or config.json and nothing but regular
//    files). The new output is swapped in with renameat2(RENAME_EXCHANGE) and the old one, now under the
//    temporary name, is removed only when it is still the very file or directory that was checked (device and
//    inode); a directory, symbolic link, FIFO, device or socket at a file output's path is an Error naming it,
//    and so is a directory that is not a model at a directory output's path. Where the file system has no
//    RENAME_EXCHANGE the old directory moves aside to "<final>.nvfp4lm-replaced-<pid>-<hex>" first; a crash before
//    it is removed leaves it there for the user (never removed by a later writer: it is the user's old output).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace nvfp4lm {

namespace fs = std::filesystem;

// What an output is: one file (a JSONL, JSON report, GGUF, `.dat` file), or a directory (a model).
enum class OutputKind { File, Directory };

// Error unless an output of `kind` may be written at `path` (called `what` in messages, e.g. "--out"): nothing is
// there, or `overwrite` and what is there is replaceable (see above). Symbolic links are not followed.
void check_replaceable(const fs::path& path, std::string_view what, OutputKind kind, bool overwrite);

// "<path>.nvfp4lm-partial-<pid>-<16 random hex digits>": a fresh temporary sibling name of `path` (not created).
fs::path temporary_sibling(const fs::path& path);

// Creates a fresh temporary sibling file of `path` with O_EXCL (a new random name while one exists) and returns its
// descriptor (O_WRONLY, or O_RDWR when `read_back`); `temporary` is set to its name.
int create_temporary_file(const fs::path& path, fs::path& temporary, bool read_back = false);

// The marker file inside a temporary directory: it holds the directory's own name, the proof that the directory is
// one this program made (StagedDirectory removes it just before publishing).
inline constexpr const char* kPartialMarkerFileName = ".nvfp4lm-partial";

// Removes the temporaries of `path` that writers killed mid-write left: siblings named like temporary_sibling's,
// of a process that is gone, owned by this user, and for a directory holding the marker that names it. Temporaries
// of a live process, or of one this process may not signal, and everything named otherwise are kept. Every writer
// calls it before making its own temporary.
void remove_stale_temporaries(const fs::path& path);

// Puts the finished temporary `staged` (a file, or a directory for OutputKind::Directory) under `final_path` in one
// atomic step and fsyncs the directory that holds it, following the rules above. On Error nothing at final_path
// has changed and `staged` is left where it is for its owner to remove.
void publish(const fs::path& staged, const fs::path& final_path, OutputKind kind, bool overwrite,
             std::string_view what);

// publish without overwrite, for a caller that has a use for an existing output (export_dat_file keeps a
// config.json with the same bytes): false, with nothing changed, when final_path exists.
bool publish_new(const fs::path& staged, const fs::path& final_path, OutputKind kind);

// The file publishing step for file systems that refuse renameat2's RENAME_NOREPLACE: link(staged, final_path),
// which fails when final_path exists, then unlink(staged). Returns false when the file system has no hard links
// either (the caller falls back to a check and rename); Error "already exists" like publish. Exposed for its test.
bool link_into_place(const fs::path& staged, const fs::path& final_path, std::string_view what);

// Writes `contents` to `path` through a temporary and publish (OutputKind::File, `overwrite` as above). A failed
// write removes its temporary.
void write_file_atomic(const fs::path& path, std::string_view contents, bool overwrite);

// A fresh temporary directory for the output `final_path` (temporary_sibling's name, made with mkdir, holding the
// marker file; stale ones of dead writers removed first), removed with everything in it when the object dies unless
// publish() moved it into place.
class StagedDirectory {
 public:
  explicit StagedDirectory(fs::path final_path);
  ~StagedDirectory();
  StagedDirectory(const StagedDirectory&) = delete;
  StagedDirectory& operator=(const StagedDirectory&) = delete;

  const fs::path& path() const { return path_; }
  const fs::path& final_path() const { return final_path_; }
  // Removes the marker, then publish(path(), final_path(), OutputKind::Directory, overwrite, what).
  void publish(bool overwrite, std::string_view what);

 private:
  fs::path final_path_;
  fs::path path_;
  bool published_ = false;
};

}  // namespace nvfp4lm
