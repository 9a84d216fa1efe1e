// safetensors reader (DESIGN.md §4): 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {string: string}}, then the raw
// little-endian data; offsets are relative to the end of the header.
//
// open() maps the file and validates the whole header before anything else may use it: header length against
// the file size (and at most 100 MB), JSON syntax, duplicate names, every entry's dtype (F32 F16 BF16 U8 I8 I32
// I64 F8_E4M3), shape (rank <= 4, non-negative, no overflow), offsets inside the data area, size == numel *
// dtype size, no two entries overlapping, metadata values being strings. Every Error names the file and the
// entry. After open(), tensor() hands out zero-copy CPU views that keep the mapping alive (an owned copy when
// the data is not aligned for its dtype), read() an owned copy through pread, and drop_pages() releases the
// pages of an entry already processed so a streaming pass over a large file stays at about one tensor of RSS.
//
// SafetensorsSet is one model's tensors, in a single model.safetensors or sharded with a
// model.safetensors.index.json (weight_map), validated: missing shards, a tensor absent from its shard, a
// tensor in two shards, shard names that leave the directory.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/files.h"
#include "core/mapped_file.h"
#include "core/tensor.h"

namespace nvfp4lm {

inline constexpr uint64_t kSafetensorsMaxHeaderBytes = uint64_t{100} << 20;

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::U8;  // F8_E4M3 reads as E4M3; packed FP4 is stored as U8 (view_as(E2M1x2) if it is)
  Shape shape;
  uint64_t offset = 0;  // absolute byte offset of the data in the file
  uint64_t bytes = 0;
};

class SafetensorsFile {
 public:
  static std::shared_ptr<SafetensorsFile> open(const fs::path& path);

  const fs::path& path() const { return file_->path(); }
  uint64_t file_bytes() const { return file_->size(); }
  // Entries in the order of their data in the file.
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const SafetensorsEntry* find(std::string_view name) const;
  // Error naming the file when the tensor is absent.
  const SafetensorsEntry& at(std::string_view name) const;

  // Zero-copy CPU view (an owned copy when the data is misaligned for its dtype). The mapping is read-only:
  // never write through the view; clone() first.
  Tensor tensor(const SafetensorsEntry& entry) const;
  Tensor tensor(std::string_view name) const { return tensor(at(name)); }
  // Owned CPU copy read with pread (does not touch the mapping).
  Tensor read(const SafetensorsEntry& entry) const;
  // Releases this entry's mapped pages from the process (see MappedFile::drop_pages).
  void drop_pages(const SafetensorsEntry& entry) const;
  // Raw bytes of an entry inside the mapping (valid while this object lives).
  const uint8_t* bytes_of(const SafetensorsEntry& entry) const { return file_->data() + entry.offset; }

 private:
  std::shared_ptr<MappedFile> file_;
  std::vector<SafetensorsEntry> entries_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

class SafetensorsSet {
 public:
  // A single file.
  static SafetensorsSet open_file(const fs::path& path);
  // model.safetensors.index.json and the shards it names (same directory).
  static SafetensorsSet open_index(const fs::path& index_path);
  // A model directory: model.safetensors or model.safetensors.index.json (not both).
  static SafetensorsSet open_dir(const fs::path& dir);

  struct Location {
    const SafetensorsFile* file = nullptr;
    const SafetensorsEntry* entry = nullptr;
  };

  // Names in file order (shards in index order, entries by offset).
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<std::shared_ptr<SafetensorsFile>>& files() const { return files_; }
  std::optional<Location> find(std::string_view name) const;
  Location at(std::string_view name) const;  // Error naming the model when absent
  bool contains(std::string_view name) const { return find(name).has_value(); }

  Tensor tensor(std::string_view name) const;
  void drop_pages(std::string_view name) const;
  // What the user would recognise: the file or the index.
  const fs::path& source() const { return source_; }

 private:
  void add(std::shared_ptr<SafetensorsFile> file);
  fs::path source_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, Location> locations_;
};

}  // namespace nvfp4lm
