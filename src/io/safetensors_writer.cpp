#include "io/safetensors_writer.h"

#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"

namespace nvfp4lm {
namespace {

const fs::path& checked_output(const fs::path& path, const std::vector<SafetensorsEntrySpec>& entries, bool overwrite) {
  std::set<std::string> names;
  for (const auto& entry : entries) {
    NVFP4LM_CHECK(!entry.name.empty() && entry.name != "__metadata__", "{}: invalid tensor name '{}'", path.string(),
                  entry.name);
    NVFP4LM_CHECK(names.insert(entry.name).second, "{}: tensor '{}' declared twice", path.string(), entry.name);
  }
  check_replaceable(path, "output", OutputKind::File, overwrite);
  return path;
}

std::string header_text(const std::vector<SafetensorsEntrySpec>& entries,
                        const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    header["__metadata__"] = meta;
  }
  uint64_t offset = 0;
  for (const auto& entry : entries) {
    const uint64_t bytes = SafetensorsWriter::entry_bytes(entry);
    header[entry.name] = {{"dtype", std::string(dtype_to_safetensors(entry.dtype))},
                          {"shape", entry.shape.to_vector()},
                          {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  // The data area starts 8-byte aligned (8-byte length + padded header), so every F32/I64 tensor written back
  // to back from an aligned start stays aligned in a mapping.
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

}  // namespace

uint64_t SafetensorsWriter::entry_bytes(const SafetensorsEntrySpec& entry) {
  return static_cast<uint64_t>(entry.shape.numel()) * dtype_bytes(entry.dtype);
}

SafetensorsWriter::SafetensorsWriter(const fs::path& path, std::vector<SafetensorsEntrySpec> entries,
                                     std::map<std::string, std::string> metadata, bool overwrite)
    : entries_(std::move(entries)), out_(checked_output(path, entries_, overwrite), overwrite) {
  const std::string header = header_text(entries_, metadata);
  uint8_t length[8];
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i, n >>= 8) length[i] = static_cast<uint8_t>(n & 0xFF);
  out_.write(length, 8);
  out_.write(header);
  // Skip leading empty entries so current_ always points at an entry that still needs data.
  while (current_ < entries_.size() && entry_bytes(entries_[current_]) == 0) ++current_;
}

SafetensorsWriter::~SafetensorsWriter() = default;  // OutputFile removes the temporary unless committed

size_t SafetensorsWriter::entry_index_for(const std::string& name, uint64_t bytes) {
  NVFP4LM_CHECK(!finished_, "{}: write of '{}' after finish()", path().string(), name);
  NVFP4LM_CHECK(current_ < entries_.size(), "{}: write of '{}' but every declared tensor is complete", path().string(),
                name);
  const auto& entry = entries_[current_];
  NVFP4LM_CHECK(entry.name == name, "{}: got data for '{}' but the next tensor to write is '{}' (declared order)",
                path().string(), name, entry.name);
  NVFP4LM_CHECK(bytes <= entry_bytes(entry) - current_written_, "{}: '{}' gets {} more bytes but only {} remain",
                path().string(), name, bytes, entry_bytes(entry) - current_written_);
  return current_;
}

const SafetensorsEntrySpec& SafetensorsWriter::declared(const std::string& name) const {
  for (const auto& entry : entries_)
    if (entry.name == name) return entry;
  NVFP4LM_FAIL("{}: tensor '{}' was not declared", path().string(), name);
}

void SafetensorsWriter::write_bytes(const std::string& name, const void* data, uint64_t bytes) {
  if (bytes == 0) {
    declared(name);  // nothing to write, but the name must be known
    return;
  }
  const size_t index = entry_index_for(name, bytes);
  out_.write(data, bytes);
  current_written_ += bytes;
  if (current_written_ == entry_bytes(entries_[index])) {
    current_written_ = 0;
    ++current_;
    while (current_ < entries_.size() && entry_bytes(entries_[current_]) == 0) ++current_;
  }
}

void SafetensorsWriter::write(const std::string& name, const Tensor& tensor) {
  const auto& entry = declared(name);
  NVFP4LM_CHECK(tensor.defined() && tensor.device().is_cpu(), "{}: tensor '{}' must be a CPU tensor", path().string(),
                name);
  NVFP4LM_CHECK(
      tensor.shape() == entry.shape && dtype_to_safetensors(tensor.dtype()) == dtype_to_safetensors(entry.dtype),
      "{}: tensor '{}' is {} but was declared {} {}", path().string(), name, tensor.str(), dtype_name(entry.dtype),
      entry.shape.str());
  NVFP4LM_CHECK(current_written_ == 0, "{}: tensor '{}' written whole while '{}' is half written", path().string(),
                name, entries_[current_].name);
  const Tensor contiguous = tensor.contiguous();
  write_bytes(name, contiguous.raw(), contiguous.nbytes());
}

void SafetensorsWriter::finish() {
  NVFP4LM_CHECK(!finished_, "{}: finish() called twice", path().string());
  NVFP4LM_CHECK(current_ == entries_.size(), "{}: tensor '{}' was declared but not (completely) written",
                path().string(), current_ < entries_.size() ? entries_[current_].name : std::string());
  out_.commit();
  finished_ = true;
}

}  // namespace nvfp4lm
