#include "io/safetensors_reader.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/json_text.h"
#include "io/shape_check.h"

namespace nvfp4lm {
namespace {

using json = nlohmann::json;

uint64_t read_le64(const uint8_t* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

// Parses the header text, rejecting duplicate top-level names (nlohmann would silently keep the last).
json parse_header(const std::string& text, const fs::path& path) {
  std::set<std::string> seen;
  std::string duplicate;
  json::parser_callback_t check_duplicates = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && parsed.is_string()) {
      const auto& name = parsed.get_ref<const std::string&>();
      if (!seen.insert(name).second && duplicate.empty()) duplicate = name;
    }
    return true;
  };
  JsonParseResult parsed = try_parse_json(text, check_duplicates);
  NVFP4LM_CHECK(parsed.ok(),
                "{}: safetensors header is not valid JSON ({}); the file is corrupt or not a safetensors file",
                path.string(), parsed.error);
  json header = std::move(parsed.value);
  NVFP4LM_CHECK(duplicate.empty(), "{}: safetensors header lists tensor '{}' twice", path.string(), duplicate);
  NVFP4LM_CHECK(header.is_object(), "{}: safetensors header must be a JSON object, got {}", path.string(),
                header.type_name());
  return header;
}

SafetensorsEntry parse_entry(const std::string& name, const json& info, uint64_t data_start, uint64_t data_bytes,
                             const fs::path& path) {
  const std::string where = fmt::format("{}: tensor '{}'", path.string(), name);
  NVFP4LM_CHECK(info.is_object(), "{}: entry must be an object with dtype, shape and data_offsets", where);
  NVFP4LM_CHECK(info.contains("dtype") && info["dtype"].is_string(), "{}: missing or non-string 'dtype'", where);
  NVFP4LM_CHECK(info.contains("shape") && info["shape"].is_array(), "{}: missing or non-array 'shape'", where);
  NVFP4LM_CHECK(info.contains("data_offsets") && info["data_offsets"].is_array() && info["data_offsets"].size() == 2,
                "{}: 'data_offsets' must be an array [begin, end]", where);

  SafetensorsEntry entry;
  entry.name = name;
  const auto& dtype_text = info["dtype"].get_ref<const std::string&>();
  const auto dtype = dtype_from_safetensors(dtype_text);
  NVFP4LM_CHECK(dtype.has_value(),
                "{}: dtype {} is not supported (supported: F32, F16, BF16, U8, I8, I32, I64, F8_E4M3)", where,
                dtype_text);
  entry.dtype = *dtype;

  const json& shape = info["shape"];
  NVFP4LM_CHECK(shape.size() <= static_cast<size_t>(Shape::kMaxRank), "{}: rank {} is not supported (at most {})",
                where, shape.size(), Shape::kMaxRank);
  std::vector<int64_t> dims;
  for (const json& dim : shape) {
    NVFP4LM_CHECK(dim.is_number_unsigned() && dim.get<uint64_t>() <= kMaxFileTensorElements,
                  "{}: shape {} has a dimension that is not a non-negative integer of sane size", where,
                  json_excerpt(shape));
    dims.push_back(static_cast<int64_t>(dim.get<uint64_t>()));
  }
  const auto numel = checked_numel(dims);
  NVFP4LM_CHECK(numel.has_value(), "{}: shape {} has more than 2^50 elements; the header is corrupt", where,
                json_excerpt(shape));
  entry.shape = Shape(dims);

  const json& offsets = info["data_offsets"];
  NVFP4LM_CHECK(offsets[0].is_number_unsigned() && offsets[1].is_number_unsigned(),
                "{}: data_offsets {} must be non-negative integers", where, json_excerpt(offsets));
  const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
  NVFP4LM_CHECK(begin <= end, "{}: data_offsets {} end before they begin", where, json_excerpt(offsets));
  NVFP4LM_CHECK(end <= data_bytes,
                "{}: data_offsets {} reach past the end of the data area ({} bytes); the file is truncated or corrupt",
                where, json_excerpt(offsets), data_bytes);
  const uint64_t expected = *numel * dtype_bytes(entry.dtype);
  NVFP4LM_CHECK(end - begin == expected, "{}: {} {} needs {} bytes but data_offsets {} span {}", where, dtype_text,
                json_excerpt(shape), expected, json_excerpt(offsets), end - begin);
  entry.offset = data_start + begin;
  entry.bytes = end - begin;
  return entry;
}

bool is_aligned(const void* pointer, size_t alignment) { return reinterpret_cast<uintptr_t>(pointer) % alignment == 0; }

}  // namespace

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const fs::path& path) {
  auto result = std::make_shared<SafetensorsFile>();
  result->file_ = MappedFile::open(path);
  const MappedFile& file = *result->file_;
  NVFP4LM_CHECK(file.size() >= 8, "{}: {} bytes is too short for a safetensors file (8-byte header length missing)",
                path.string(), file.size());
  const uint64_t header_bytes = read_le64(file.data());
  NVFP4LM_CHECK(header_bytes <= file.size() - 8,
                "{}: header length {} reaches past the end of the file ({} bytes); the file is truncated or not a "
                "safetensors file",
                path.string(), header_bytes, file.size());
  NVFP4LM_CHECK(header_bytes <= kSafetensorsMaxHeaderBytes, "{}: header length {} exceeds the 100 MB limit",
                path.string(), header_bytes);
  NVFP4LM_CHECK(header_bytes >= 2, "{}: header length {} is too short for a JSON object", path.string(), header_bytes);
  const std::string text(reinterpret_cast<const char*>(file.data() + 8), static_cast<size_t>(header_bytes));
  const json header = parse_header(text, path);

  const uint64_t data_start = 8 + header_bytes;
  const uint64_t data_bytes = file.size() - data_start;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      NVFP4LM_CHECK(info.is_object() || info.is_null(), "{}: __metadata__ must be an object of strings", path.string());
      if (info.is_null()) continue;
      for (const auto& [key, value] : info.items()) {
        NVFP4LM_CHECK(value.is_string(), "{}: __metadata__ value of '{}' must be a string, got {}", path.string(), key,
                      value.type_name());
        result->metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    result->entries_.push_back(parse_entry(name, info, data_start, data_bytes, path));
  }

  // Data order, then the tiling rule of the reference implementation: the tensors cover the data area exactly,
  // back to back from byte 0 to the end of the file. A header length cut by a few bytes (still valid JSON thanks to
  // the padding) shifts every tensor and leaves the last one short of the end; trailing bytes are no tensor's;
  // both are corruption, not files to read shifted.
  auto& entries = result->entries_;
  std::sort(entries.begin(), entries.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.bytes < b.bytes;
  });
  uint64_t covered = 0;  // bytes of the data area tiled so far
  for (size_t i = 0; i < entries.size(); ++i) {
    const uint64_t begin = entries[i].offset - data_start;
    if (begin < covered) {
      const auto& previous = entries[i - 1];
      NVFP4LM_FAIL("{}: tensors '{}' and '{}' overlap (bytes {}..{} and {}..{} of the data area)", path.string(),
                   previous.name, entries[i].name, previous.offset - data_start,
                   previous.offset - data_start + previous.bytes, begin, begin + entries[i].bytes);
    }
    NVFP4LM_CHECK(begin == covered,
                  "{}: bytes {}..{} of the data area belong to no tensor (before '{}'); the header and the data do "
                  "not match, the file is corrupt",
                  path.string(), covered, begin, entries[i].name);
    covered = begin + entries[i].bytes;
  }
  NVFP4LM_CHECK(covered == data_bytes,
                "{}: the tensors end at byte {} of the data area but it has {} bytes (the header length or the file "
                "size is wrong: a cut or extended header, or trailing bytes); the file is corrupt",
                path.string(), covered, data_bytes);
  for (size_t i = 0; i < entries.size(); ++i) result->index_[entries[i].name] = i;
  return result;
}

const SafetensorsEntry* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &entries_[it->second];
}

const SafetensorsEntry& SafetensorsFile::at(std::string_view name) const {
  const SafetensorsEntry* entry = find(name);
  NVFP4LM_CHECK(entry != nullptr, "{}: tensor '{}' is not in this file", path().string(), name);
  return *entry;
}

Tensor SafetensorsFile::tensor(const SafetensorsEntry& entry) const {
  const uint8_t* data = bytes_of(entry);
  if (entry.bytes == 0 || !is_aligned(data, dtype_bytes(entry.dtype))) return read(entry);
  return Tensor::external(const_cast<uint8_t*>(data), entry.shape, entry.dtype, Device::cpu(), file_);
}

Tensor SafetensorsFile::read(const SafetensorsEntry& entry) const {
  Tensor out = Tensor::empty(entry.shape, entry.dtype);
  if (entry.bytes) file_->read_at(entry.offset, out.raw(), entry.bytes);
  return out;
}

void SafetensorsFile::drop_pages(const SafetensorsEntry& entry) const { file_->drop_pages(entry.offset, entry.bytes); }

// ---- SafetensorsSet -------------------------------------------------------------------------------------------

void SafetensorsSet::add(std::shared_ptr<SafetensorsFile> file) {
  for (const auto& entry : file->entries()) {
    auto [it, inserted] = locations_.emplace(entry.name, Location{file.get(), &entry});
    NVFP4LM_CHECK(inserted, "{}: tensor '{}' appears in both {} and {}", source_.string(), entry.name,
                  it->second.file->path().filename().string(), file->path().filename().string());
    names_.push_back(entry.name);
  }
  files_.push_back(std::move(file));
}

SafetensorsSet SafetensorsSet::open_file(const fs::path& path) {
  SafetensorsSet set;
  set.source_ = path;
  set.add(SafetensorsFile::open(path));
  return set;
}

SafetensorsSet SafetensorsSet::open_index(const fs::path& index_path) {
  SafetensorsSet set;
  set.source_ = index_path;
  const std::string where = index_path.string();
  const json index = read_json_file(index_path);
  NVFP4LM_CHECK(index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(),
                "{}: expected an object with a 'weight_map' object (tensor name -> shard file)", where);
  const json& weight_map = index["weight_map"];
  NVFP4LM_CHECK(!weight_map.empty(), "{}: 'weight_map' is empty", where);

  // Shards in order of first mention, each opened once.
  std::vector<std::string> shard_names;
  for (const auto& [name, shard] : weight_map.items()) {
    NVFP4LM_CHECK(shard.is_string(), "{}: weight_map entry '{}' must name a shard file", where, name);
    const auto& shard_name = shard.get_ref<const std::string&>();
    NVFP4LM_CHECK(
        !shard_name.empty() && shard_name.find('/') == std::string::npos && shard_name != "." && shard_name != "..",
        "{}: weight_map entry '{}' names shard '{}', which is not a plain file name in this directory", where, name,
        shard_name);
    if (std::find(shard_names.begin(), shard_names.end(), shard_name) == shard_names.end())
      shard_names.push_back(shard_name);
  }
  const fs::path dir = index_path.parent_path();
  for (const auto& shard_name : shard_names) {
    const fs::path shard_path = dir / shard_name;
    std::error_code ec;
    NVFP4LM_CHECK(fs::is_regular_file(shard_path, ec), "{}: shard {} is missing (named by the weight_map)", where,
                  shard_path.string());
    set.add(SafetensorsFile::open(shard_path));
  }
  for (const auto& [name, shard] : weight_map.items()) {
    auto it = set.locations_.find(name);
    const auto& shard_name = shard.get_ref<const std::string&>();
    NVFP4LM_CHECK(it != set.locations_.end() && it->second.file->path().filename() == shard_name,
                  "{}: tensor '{}' is mapped to {} but that shard does not contain it", where, name, shard_name);
  }
  for (const auto& name : set.names_) {
    NVFP4LM_CHECK(weight_map.contains(name), "{}: shard {} contains tensor '{}', which the weight_map does not list",
                  where, set.locations_.at(name).file->path().filename().string(), name);
  }
  return set;
}

SafetensorsSet SafetensorsSet::open_dir(const fs::path& dir) {
  const fs::path single = dir / "model.safetensors", index = dir / "model.safetensors.index.json";
  std::error_code ec;
  const bool has_single = fs::exists(single, ec), has_index = fs::exists(index, ec);
  NVFP4LM_CHECK(!(has_single && has_index),
                "{}: holds both model.safetensors and model.safetensors.index.json; remove the stale one",
                dir.string());
  NVFP4LM_CHECK(has_single || has_index, "{}: no model.safetensors or model.safetensors.index.json", dir.string());
  return has_single ? open_file(single) : open_index(index);
}

std::optional<SafetensorsSet::Location> SafetensorsSet::find(std::string_view name) const {
  auto it = locations_.find(std::string(name));
  if (it == locations_.end()) return std::nullopt;
  return it->second;
}

SafetensorsSet::Location SafetensorsSet::at(std::string_view name) const {
  auto location = find(name);
  NVFP4LM_CHECK(location.has_value(), "{}: tensor '{}' is missing", source_.string(), name);
  return *location;
}

Tensor SafetensorsSet::tensor(std::string_view name) const {
  Location location = at(name);
  return location.file->tensor(*location.entry);
}

void SafetensorsSet::drop_pages(std::string_view name) const {
  Location location = at(name);
  location.file->drop_pages(*location.entry);
}

}  // namespace nvfp4lm
