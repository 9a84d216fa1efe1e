// The `.dat` weight format of the F# predecessor (DESIGN.md §4), kept for compatibility:
//   LEB128 entry count; per entry: LEB128 key length, UTF-8 key, LEB128 element type, LEB128 ndim, ndim LEB128
//   dims, raw little-endian payload of numel * element size bytes. No alignment, no padding, nothing after the
//   last entry. LEB128 is unsigned, at most 10 bytes for a 64-bit value.
// Element types: 0 u8, 1 i8, 2 i16, 3 i32, 4 i64, 5 f16, 6 f32, 7 f64, 11 bool, 15 bf16, 100 packed E2M1 pairs
// (one byte = two FP4 codes; dims are in bytes, [out, in/2]), 101 E4M3.
//
// DatFile::open maps the file and scans it once, checking every LEB128 value (length, overflow), key length,
// key UTF-8, element type, ndim (<= 4), dims (no overflow) and payload size against the bytes that remain
// before reading them, and rejecting duplicate keys and trailing bytes. Errors name the file, the entry index
// and key (when read), and the byte offset. Payloads then come out as zero-copy tensors (owned copies when
// misaligned for their type, which is common here since nothing is aligned; i16/f64/bool convert to
// I32/F32/U8 copies).
//
// DatWriter streams entries one after another into a temporary sibling and renames it on finish(); the entry
// count is declared up front because it comes first in the file.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/files.h"
#include "core/mapped_file.h"
#include "core/tensor.h"

namespace nvfp4lm {

enum class DatType : uint32_t {
  U8 = 0,
  I8 = 1,
  I16 = 2,
  I32 = 3,
  I64 = 4,
  F16 = 5,
  F32 = 6,
  F64 = 7,
  Bool = 11,
  BF16 = 15,
  E2M1x2 = 100,
  E4M3 = 101,
};

std::optional<DatType> dat_type_from_code(uint64_t code);
size_t dat_type_bytes(DatType type);
std::string_view dat_type_name(DatType type);  // "f32", "e2m1x2", ...
// The element type a DType is written as (every DType has one).
DatType dat_type_of(DType dtype);

// Unsigned LEB128 (7 bits a byte, low first, high bit = more).
void append_leb128(std::string& out, uint64_t value);

struct DatEntry {
  size_t index = 0;  // position in the file
  std::string key;
  DatType type = DatType::U8;
  std::vector<int64_t> dims;
  uint64_t offset = 0;  // absolute byte offset of the payload
  uint64_t bytes = 0;
  Shape shape() const { return Shape(dims); }
};

class DatFile {
 public:
  static std::shared_ptr<DatFile> open(const fs::path& path);

  const fs::path& path() const { return file_->path(); }
  uint64_t file_bytes() const { return file_->size(); }
  const std::vector<DatEntry>& entries() const { return entries_; }
  const DatEntry* find(std::string_view key) const;
  const DatEntry& at(std::string_view key) const;  // Error naming the file when absent

  // The payload as a CPU tensor: zero-copy (read-only: never write through it) for types with a DType when
  // aligned, otherwise an owned copy;
  // i16 -> I32, f64 -> F32 (rounded), bool -> U8 copies.
  Tensor tensor(const DatEntry& entry) const;
  const uint8_t* bytes_of(const DatEntry& entry) const { return file_->data() + entry.offset; }
  void drop_pages(const DatEntry& entry) const { file_->drop_pages(entry.offset, entry.bytes); }

 private:
  std::shared_ptr<MappedFile> file_;
  std::vector<DatEntry> entries_;
  std::unordered_map<std::string, size_t> index_;
};

class DatWriter {
 public:
  // Fails when `path` exists and overwrite is false.
  DatWriter(const fs::path& path, uint64_t entry_count, bool overwrite = false);
  DatWriter(const DatWriter&) = delete;
  DatWriter& operator=(const DatWriter&) = delete;

  // A whole entry from a CPU tensor of any strides (type from its dtype).
  void write(const std::string& key, const Tensor& tensor);
  // An entry written in pieces: begin_entry, then write_bytes adding up to exactly numel * type size.
  void begin_entry(const std::string& key, DatType type, const std::vector<int64_t>& dims);
  void write_bytes(const void* data, uint64_t bytes);
  // Checks that every declared entry is complete, fsyncs and renames.
  void finish();
  const fs::path& path() const { return out_.final_path(); }

 private:
  void check_previous_complete();

  OutputFile out_;
  uint64_t entry_count_ = 0;
  uint64_t entries_begun_ = 0;
  uint64_t remaining_ = 0;  // payload bytes the current entry still needs
  std::string current_key_;
  std::unordered_set<std::string> keys_;
  bool finished_ = false;
};

}  // namespace nvfp4lm
