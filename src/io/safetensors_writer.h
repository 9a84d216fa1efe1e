// Streaming safetensors writer. The caller declares every entry (name, dtype, shape) up front, so the header
// can be written first, then supplies each entry's data in the declared order, whole (write) or in pieces
// (write_bytes); nothing but a small buffer is held in memory. The header is padded with spaces to a
// multiple of 8 bytes as Hugging Face's writer does, keys keep the declared order with __metadata__ first,
// and entries are laid out back to back in that order. E2M1x2 (packed FP4) is stored as U8, E4M3 as F8_E4M3.
// Output goes to a temporary sibling; finish() checks every entry is complete, fsyncs and renames; a writer
// destroyed without finish() removes the temporary file.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/mapped_file.h"
#include "core/tensor.h"

namespace nvfp4lm {

struct SafetensorsEntrySpec {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
};

class SafetensorsWriter {
 public:
  // Fails (Error) on an empty or duplicate name, or when `path` exists and overwrite is false.
  SafetensorsWriter(const fs::path& path, std::vector<SafetensorsEntrySpec> entries,
                    std::map<std::string, std::string> metadata = {{"format", "pt"}}, bool overwrite = false);
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // The whole data of `name`, which must be the next entry; `tensor` must be a CPU tensor of the declared shape
  // and dtype (E2M1x2 and U8 are interchangeable, as are E4M3 and U8 of the same shape). Any strides.
  void write(const std::string& name, const Tensor& tensor);
  // A piece of `name`'s data: pieces of one entry arrive in order and add up to exactly its size; the entry
  // after it can start only when it is complete.
  void write_bytes(const std::string& name, const void* data, uint64_t bytes);
  void finish();

  const std::vector<SafetensorsEntrySpec>& entries() const { return entries_; }
  // Bytes of each entry's data (numel * dtype size).
  static uint64_t entry_bytes(const SafetensorsEntrySpec& entry);
  const fs::path& path() const { return out_.final_path(); }

 private:
  size_t entry_index_for(const std::string& name, uint64_t bytes);
  const SafetensorsEntrySpec& declared(const std::string& name) const;

  std::vector<SafetensorsEntrySpec> entries_;
  OutputFile out_;
  size_t current_ = 0;            // entry being written
  uint64_t current_written_ = 0;  // bytes of it written so far
  bool finished_ = false;
};

}  // namespace nvfp4lm
