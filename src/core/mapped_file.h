// Low-level file access shared by the weight-format readers and writers and the tokenizer's loader.
//  - MappedFile: a whole file mapped read-only (MAP_PRIVATE), optionally pre-faulted (MAP_POPULATE: tokenizer.json
//    is ~11 MB, parsed in place, and page faults were a large part of its load time) and capped in size. Readers
//    validate every offset against size() before touching data(); tensors built on the mapping hold a shared_ptr to it,
//    so the mapping lives as long as any view. drop_pages() hands the pages of a range back to the kernel (madvise
//    DONTNEED) so a streaming pass over a large file keeps its RSS at about one tensor; read_at() is the copy path
//    (pread).
//  - OutputFile: a sequential, buffered binary writer that writes to a temporary sibling of the final name
//    (core/publish.h), and on commit() flushes, fsyncs and publishes it (refusing an existing file unless
//    overwrite, atomically). Destroyed without commit() it removes the temporary, so a failed write never leaves a
//    partial file under the final name nor a temporary beside it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/files.h"

namespace nvfp4lm {

class MappedFile {
 public:
  struct Options {
    uint64_t max_bytes = UINT64_MAX;  // larger files are an Error (open_input_file)
    bool populate = false;            // fault every page in now (one sequential read instead of many faults)
  };
  // Opens and maps `path`; Error names the path when it is missing, not a regular file, unreadable or too large.
  static std::shared_ptr<MappedFile> open(const fs::path& path, Options options);
  static std::shared_ptr<MappedFile> open(const fs::path& path) { return open(path, Options{}); }
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const fs::path& path() const { return path_; }
  uint64_t size() const { return size_; }
  // Start of the mapping (nullptr for an empty file). Callers check offsets against size() first.
  const uint8_t* data() const { return data_; }
  // The whole file as text (empty for an empty file).
  std::string_view text() const {
    return size_ == 0 ? std::string_view() : std::string_view(reinterpret_cast<const char*>(data_), size_);
  }

  // Copies [offset, offset + bytes) into dst with pread; the range must lie inside the file.
  void read_at(uint64_t offset, void* dst, uint64_t bytes) const;
  // Releases the mapped pages of [offset, offset + bytes) from this process (they stay in the page cache and
  // fault back in if touched again). Whole pages around the range are released; harmless for a read-only
  // private mapping.
  void drop_pages(uint64_t offset, uint64_t bytes) const;

 private:
  MappedFile() = default;
  fs::path path_;
  int fd_ = -1;
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

class OutputFile {
 public:
  // Creates a fresh temporary sibling of `final_path` (after removing those of dead writers). The caller checks early
  // whether final_path may be written (guard_output / check_replaceable); commit() checks again as it publishes.
  OutputFile(fs::path final_path, bool overwrite);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const void* data, uint64_t bytes);
  void write(const std::string& text) { write(text.data(), text.size()); }
  // Bytes written so far.
  uint64_t position() const { return position_; }
  // Flush, fsync, close, publish (core/publish.h: Error when final_path exists, unless overwrite and it is a
  // regular file).
  void commit();

  const fs::path& final_path() const { return final_path_; }
  const fs::path& temporary_path() const { return temporary_path_; }

 private:
  void flush();
  void write_fully(const uint8_t* data, uint64_t bytes);

  fs::path final_path_;
  fs::path temporary_path_;
  bool overwrite_ = false;
  int fd_ = -1;
  bool committed_ = false;
  uint64_t position_ = 0;
  std::vector<uint8_t> buffer_;
  size_t buffered_ = 0;
};

}  // namespace nvfp4lm
