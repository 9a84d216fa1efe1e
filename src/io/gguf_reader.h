// Reads a GGUF file (io/gguf_format.h): its metadata and tensor table, checked completely before anything is
// used, so any file (ours, llama.cpp's, or a hostile one) either parses into consistent values or fails with an
// Error naming the file and what was wrong. Used by `nvfp4lm info` and by the tests of the GGUF export.
//
// Checks: magic and version (2 or 3); every count, string and array bounded by the bytes that are left; value and
// element types known (arrays of arrays are refused, as ggml refuses them); keys unique; general.alignment a
// power of two; tensor names unique and non-empty, rank 1..4, dims below 2^56 elements in all, a ggml type whose
// block layout is known and divides the innermost dimension; data offsets aligned, inside the file and not
// overlapping.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/files.h"
#include "core/shape.h"
#include "io/gguf_format.h"

namespace nvfp4lm {

class MappedFile;

// A metadata value: a scalar is held as a one-element array of its type (`is_array` false).
struct GgufValue {
  gguf::ValueType type = gguf::ValueType::U8;  // the element type (never Array)
  bool is_array = false;
  std::vector<uint64_t> unsigned_values;  // U8, U16, U32, U64, Bool
  std::vector<int64_t> signed_values;     // I8, I16, I32, I64
  std::vector<double> float_values;       // F32, F64
  std::vector<std::string> strings;       // String

  size_t size() const;
  // The i-th element as a string / integer / number; nullopt when the type does not fit (an integer that does not
  // fit in int64 included).
  std::optional<std::string_view> string(size_t i = 0) const;
  std::optional<int64_t> integer(size_t i = 0) const;
  std::optional<double> number(size_t i = 0) const;
  // For messages: "u32 3", "string \"qwen3\"", "array of 151936 string".
  std::string describe() const;
};

struct GgufTensorInfo {
  std::string name;
  Shape shape;               // row-major, outermost first (the file's dims reversed)
  uint32_t type_id = 0;      // ggml type
  std::string_view type;     // its name ("q4_0", "nvfp4")
  uint64_t file_offset = 0;  // of the first byte, from the start of the file
  uint64_t bytes = 0;
};

// True when `path` is a regular file that starts with the GGUF magic, whatever its name: GGUF files are named
// .gguf by convention only (llama.cpp reads any name). Never throws; false when the file cannot be read.
bool starts_with_gguf_magic(const fs::path& path);

class GgufFile {
 public:
  // Maps and parses `path`.
  static GgufFile open(const fs::path& path);
  // Parses bytes held by the caller (kept alive by the caller while tensor_data is used); `origin` names them.
  static GgufFile parse(const uint8_t* data, uint64_t size, const std::string& origin);

  const std::string& origin() const { return origin_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t file_bytes() const { return size_; }
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;
  // The value of `key`; Error naming the file when missing or not of a kind that fits.
  std::string_view string(std::string_view key) const;
  int64_t integer(std::string_view key) const;
  double number(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  const uint8_t* tensor_data(const GgufTensorInfo& tensor) const { return data_ + tensor.file_offset; }

 private:
  std::shared_ptr<MappedFile> mapping_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  std::string origin_;
  uint32_t version_ = 0;
  uint64_t alignment_ = gguf::kDefaultAlignment;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
};

}  // namespace nvfp4lm
