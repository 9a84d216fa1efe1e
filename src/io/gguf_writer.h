// Streaming GGUF v3 writer (layout in io/gguf_format.h). The caller adds the metadata and declares every tensor
// (name, ggml type, shape) first; begin() then writes the header, and the tensors' bytes follow in declared
// order, whole or in pieces, the writer inserting the alignment padding between them. Nothing but a small buffer
// is held, so a multi-GiB model streams through. Output goes to a temporary sibling of the path and is published
// by finish() (core/publish.h); a writer destroyed before finish() leaves nothing, neither under the final name nor
// beside it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/files.h"
#include "core/shape.h"
#include "io/gguf_format.h"

namespace nvfp4lm {

class OutputFile;

struct GgufTensorSpec {
  std::string name;
  gguf::GgmlType type = gguf::GgmlType::F32;
  Shape shape;  // row-major, outermost first (PyTorch order: [out, in] for a weight); stored reversed in the file
};

class GgufWriter {
 public:
  explicit GgufWriter(uint64_t alignment = gguf::kDefaultAlignment);
  ~GgufWriter();
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  // ---- before begin(): metadata (in the order added; a key may be added once) and tensors ----
  void add_string(std::string_view key, std::string_view value);
  void add_u32(std::string_view key, uint32_t value);
  void add_i32(std::string_view key, int32_t value);
  void add_f32(std::string_view key, float value);
  void add_bool(std::string_view key, bool value);
  void add_string_array(std::string_view key, const std::vector<std::string>& values);
  void add_i32_array(std::string_view key, const std::vector<int32_t>& values);
  void add_tensor(GgufTensorSpec spec);

  // Bytes of the data of a declared tensor (rows of row_bytes(type, innermost dimension)).
  static uint64_t tensor_bytes(const GgufTensorSpec& spec);
  const std::vector<GgufTensorSpec>& tensors() const { return tensors_; }

  // ---- writing ----
  // Creates the temporary file and writes the header. An existing `path` is refused when finish() publishes,
  // unless `overwrite` and it is a regular file; callers check it early too (guard_output).
  void begin(const fs::path& path, bool overwrite);
  // A piece of `name`'s bytes: `name` must be the tensor being written (or the next one once it is complete);
  // pieces add up to exactly tensor_bytes().
  void write(std::string_view name, const void* data, uint64_t bytes);
  // Checks every tensor is complete, fsyncs and publishes.
  void finish();
  uint64_t bytes_written() const;

 private:
  void add_key(std::string_view key, gguf::ValueType type);
  void append(const void* data, uint64_t bytes);
  void append_string(std::string_view text);
  void pad_to_alignment();
  template <class T>
  void append_value(T value) {
    append(&value, sizeof value);
  }

  uint64_t alignment_;
  std::vector<uint8_t> metadata_;
  uint64_t metadata_count_ = 0;
  std::vector<std::string> keys_;
  std::vector<GgufTensorSpec> tensors_;
  std::unique_ptr<OutputFile> out_;
  uint64_t data_start_ = 0;
  size_t current_ = 0;         // tensor being written
  uint64_t current_done_ = 0;  // bytes of it written
  bool finished_ = false;
};

}  // namespace nvfp4lm
