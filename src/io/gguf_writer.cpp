// See gguf_writer.h.
#include "io/gguf_writer.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "core/error.h"
#include "core/mapped_file.h"

namespace nvfp4lm {

GgufWriter::GgufWriter(uint64_t alignment) : alignment_(alignment) {
  NVFP4LM_ASSERT(alignment > 0 && (alignment & (alignment - 1)) == 0, "GGUF alignment {} is not a power of two",
                 alignment);
}

GgufWriter::~GgufWriter() = default;

void GgufWriter::append(const void* data, uint64_t bytes) {
  // resize + memcpy: GCC 12's -Wstringop-overflow misfires on vector::insert of a few bytes.
  const size_t at = metadata_.size();
  metadata_.resize(at + bytes);
  if (bytes > 0) std::memcpy(metadata_.data() + at, data, bytes);
}

void GgufWriter::append_string(std::string_view text) {
  append_value<uint64_t>(text.size());
  append(text.data(), text.size());
}

void GgufWriter::add_key(std::string_view key, gguf::ValueType type) {
  NVFP4LM_ASSERT(!out_, "GGUF metadata '{}' added after begin()", key);
  NVFP4LM_ASSERT(!key.empty() && std::find(keys_.begin(), keys_.end(), key) == keys_.end(),
                 "GGUF metadata key '{}' is empty or added twice", key);
  keys_.emplace_back(key);
  append_string(key);
  append_value(static_cast<uint32_t>(type));
  ++metadata_count_;
}

void GgufWriter::add_string(std::string_view key, std::string_view value) {
  add_key(key, gguf::ValueType::String);
  append_string(value);
}

void GgufWriter::add_u32(std::string_view key, uint32_t value) {
  add_key(key, gguf::ValueType::U32);
  append_value(value);
}

void GgufWriter::add_i32(std::string_view key, int32_t value) {
  add_key(key, gguf::ValueType::I32);
  append_value(value);
}

void GgufWriter::add_f32(std::string_view key, float value) {
  add_key(key, gguf::ValueType::F32);
  append_value(value);
}

void GgufWriter::add_bool(std::string_view key, bool value) {
  add_key(key, gguf::ValueType::Bool);
  append_value<uint8_t>(value ? 1 : 0);
}

void GgufWriter::add_string_array(std::string_view key, const std::vector<std::string>& values) {
  add_key(key, gguf::ValueType::Array);
  append_value(static_cast<uint32_t>(gguf::ValueType::String));
  append_value<uint64_t>(values.size());
  for (const std::string& value : values) append_string(value);
}

void GgufWriter::add_i32_array(std::string_view key, const std::vector<int32_t>& values) {
  add_key(key, gguf::ValueType::Array);
  append_value(static_cast<uint32_t>(gguf::ValueType::I32));
  append_value<uint64_t>(values.size());
  append(values.data(), values.size() * sizeof(int32_t));
}

void GgufWriter::add_tensor(GgufTensorSpec spec) {
  NVFP4LM_ASSERT(!out_, "GGUF tensor '{}' declared after begin()", spec.name);
  NVFP4LM_ASSERT(!spec.name.empty() && spec.shape.rank() >= 1 && spec.shape.rank() <= 4,
                 "GGUF tensor '{}' of shape {}: needs a name and rank 1..4", spec.name, spec.shape.str());
  for (const GgufTensorSpec& other : tensors_)
    NVFP4LM_ASSERT(other.name != spec.name, "GGUF tensor '{}' declared twice", spec.name);
  tensor_bytes(spec);  // checks the row fits whole blocks
  tensors_.push_back(std::move(spec));
}

uint64_t GgufWriter::tensor_bytes(const GgufTensorSpec& spec) {
  const int64_t inner = spec.shape[spec.shape.rank() - 1];
  const uint64_t rows = static_cast<uint64_t>(spec.shape.numel() / std::max<int64_t>(inner, 1));
  return rows * gguf::row_bytes(spec.type, inner, spec.name);
}

void GgufWriter::begin(const fs::path& path, bool overwrite) {
  NVFP4LM_ASSERT(!out_, "GgufWriter::begin called twice");
  std::vector<uint8_t> header;
  auto put = [&](const void* data, uint64_t bytes) {
    const size_t at = header.size();
    header.resize(at + bytes);
    if (bytes > 0) std::memcpy(header.data() + at, data, bytes);
  };
  auto put_u32 = [&](uint32_t v) { put(&v, 4); };
  auto put_u64 = [&](uint64_t v) { put(&v, 8); };
  put_u32(gguf::kMagic);
  put_u32(gguf::kVersion);
  put_u64(tensors_.size());
  put_u64(metadata_count_ + (alignment_ != gguf::kDefaultAlignment ? 1 : 0));
  put(metadata_.data(), metadata_.size());
  if (alignment_ != gguf::kDefaultAlignment) {
    const std::string key = "general.alignment";
    put_u64(key.size());
    put(key.data(), key.size());
    put_u32(static_cast<uint32_t>(gguf::ValueType::U32));
    put_u32(static_cast<uint32_t>(alignment_));
  }
  uint64_t offset = 0;
  for (const GgufTensorSpec& spec : tensors_) {
    put_u64(spec.name.size());
    put(spec.name.data(), spec.name.size());
    put_u32(static_cast<uint32_t>(spec.shape.rank()));
    for (int d = spec.shape.rank() - 1; d >= 0; --d) put_u64(static_cast<uint64_t>(spec.shape[d]));
    put_u32(static_cast<uint32_t>(spec.type));
    put_u64(offset);
    offset = gguf::align_up(offset + tensor_bytes(spec), alignment_);
  }
  header.resize(gguf::align_up(header.size(), alignment_), 0);
  data_start_ = header.size();
  out_ = std::make_unique<OutputFile>(path, overwrite);
  out_->write(header.data(), header.size());
}

void GgufWriter::pad_to_alignment() {
  static const uint8_t zeros[256] = {};
  const uint64_t used = out_->position() - data_start_;
  out_->write(zeros, gguf::align_up(used, alignment_) - used);
}

void GgufWriter::write(std::string_view name, const void* data, uint64_t bytes) {
  NVFP4LM_ASSERT(out_ && !finished_, "GGUF tensor '{}' written outside begin() .. finish()", name);
  // Past the tensors that are complete (each followed by its padding) to the one named.
  while (current_ < tensors_.size() && current_done_ == tensor_bytes(tensors_[current_]) &&
         tensors_[current_].name != name) {
    pad_to_alignment();
    ++current_;
    current_done_ = 0;
  }
  NVFP4LM_CHECK(current_ < tensors_.size() && tensors_[current_].name == name,
                "{}: GGUF tensor '{}' written out of order; the one expected is '{}'", out_->final_path().string(),
                name, current_ < tensors_.size() ? tensors_[current_].name : std::string("(none)"));
  const uint64_t total = tensor_bytes(tensors_[current_]);
  NVFP4LM_CHECK(bytes <= total - current_done_, "{}: GGUF tensor '{}' gets {} bytes but only {} remain",
                out_->final_path().string(), name, bytes, total - current_done_);
  out_->write(data, bytes);
  current_done_ += bytes;
}

void GgufWriter::finish() {
  NVFP4LM_ASSERT(out_ && !finished_, "GgufWriter::finish without begin(), or twice");
  while (current_ < tensors_.size() && current_done_ == tensor_bytes(tensors_[current_])) {
    pad_to_alignment();  // also after the last tensor, as gguf-py writes it
    ++current_;
    current_done_ = 0;
  }
  NVFP4LM_CHECK(current_ == tensors_.size(), "{}: GGUF tensor '{}' was declared but not (completely) written",
                out_->final_path().string(), current_ < tensors_.size() ? tensors_[current_].name : "");
  out_->commit();
  finished_ = true;
}

uint64_t GgufWriter::bytes_written() const { return out_ ? out_->position() : 0; }

}  // namespace nvfp4lm
