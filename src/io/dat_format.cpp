#include "io/dat_format.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/numeric.h"
#include "io/shape_check.h"

namespace nvfp4lm {
namespace {

constexpr uint64_t kMaxKeyBytes = 65536;
constexpr uint64_t kMaxDims = static_cast<uint64_t>(Shape::kMaxRank);
// Smallest possible entry: key length (1) + key (1) + type (1) + ndim (1); bounds the entry count.
constexpr uint64_t kMinEntryBytes = 4;

bool valid_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<uint8_t>(text[i]);
    size_t extra = 0;
    uint32_t code = 0;
    if (byte < 0x80) {
      ++i;
      continue;
    } else if ((byte & 0xE0) == 0xC0) {
      extra = 1;
      code = byte & 0x1F;
    } else if ((byte & 0xF0) == 0xE0) {
      extra = 2;
      code = byte & 0x0F;
    } else if ((byte & 0xF8) == 0xF0) {
      extra = 3;
      code = byte & 0x07;
    } else {
      return false;
    }
    if (i + extra >= text.size()) return false;  // sequence cut off by the end
    for (size_t k = 1; k <= extra; ++k) {
      const auto next = static_cast<uint8_t>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3F);
    }
    static constexpr uint32_t kMinimum[4] = {0, 0x80, 0x800, 0x10000};
    if (code < kMinimum[extra] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
    i += extra + 1;
  }
  return true;
}

// Reads the file front to back; every read is checked against the end first.
class Scanner {
 public:
  Scanner(const uint8_t* data, uint64_t size, const fs::path& path) : data_(data), size_(size), path_(path) {}

  uint64_t position() const { return position_; }
  uint64_t remaining() const { return size_ - position_; }

  // `what` names the field and, once known, the entry ("entry 3 ('model.norm.weight') ndim").
  uint64_t leb128(const std::string& what) {
    const uint64_t start = position_;
    uint64_t value = 0;
    for (int i = 0; i < 10; ++i) {
      NVFP4LM_CHECK(position_ < size_, "{}: {} at byte offset {}: the file ends inside a LEB128 number (truncated)",
                    path_.string(), what, start);
      const uint8_t byte = data_[position_++];
      const uint64_t bits = byte & 0x7F;
      // The 10th byte holds bit 63 only; anything more does not fit in 64 bits.
      NVFP4LM_CHECK(i < 9 || bits <= 1, "{}: {} at byte offset {}: LEB128 number overflows 64 bits", path_.string(),
                    what, start);
      value |= bits << (7 * i);
      if (!(byte & 0x80)) return value;
    }
    NVFP4LM_FAIL("{}: {} at byte offset {}: LEB128 number is longer than 10 bytes", path_.string(), what, start);
  }

  void skip(uint64_t bytes) { position_ += bytes; }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t position_ = 0;
  const fs::path& path_;
};

template <typename From, typename To, typename Convert>
void convert_payload(const uint8_t* src, To* dst, uint64_t count, Convert convert) {
  for (uint64_t i = 0; i < count; ++i) {
    From value;
    std::memcpy(&value, src + i * sizeof(From), sizeof(From));
    dst[i] = convert(value);
  }
}

}  // namespace

std::optional<DatType> dat_type_from_code(uint64_t code) {
  switch (code) {
    case 0:
    case 1:
    case 2:
    case 3:
    case 4:
    case 5:
    case 6:
    case 7:
    case 11:
    case 15:
    case 100:
    case 101:
      return static_cast<DatType>(code);
    default:
      return std::nullopt;
  }
}

size_t dat_type_bytes(DatType type) {
  switch (type) {
    case DatType::U8:
    case DatType::I8:
    case DatType::Bool:
    case DatType::E2M1x2:
    case DatType::E4M3:
      return 1;
    case DatType::I16:
    case DatType::F16:
    case DatType::BF16:
      return 2;
    case DatType::I32:
    case DatType::F32:
      return 4;
    case DatType::I64:
    case DatType::F64:
      return 8;
  }
  return 1;
}

std::string_view dat_type_name(DatType type) {
  switch (type) {
    case DatType::U8:
      return "u8";
    case DatType::I8:
      return "i8";
    case DatType::I16:
      return "i16";
    case DatType::I32:
      return "i32";
    case DatType::I64:
      return "i64";
    case DatType::F16:
      return "f16";
    case DatType::F32:
      return "f32";
    case DatType::F64:
      return "f64";
    case DatType::Bool:
      return "bool";
    case DatType::BF16:
      return "bf16";
    case DatType::E2M1x2:
      return "e2m1x2";
    case DatType::E4M3:
      return "e4m3";
  }
  return "?";
}

DatType dat_type_of(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return DatType::F32;
    case DType::BF16:
      return DatType::BF16;
    case DType::F16:
      return DatType::F16;
    case DType::U8:
      return DatType::U8;
    case DType::I8:
      return DatType::I8;
    case DType::I32:
      return DatType::I32;
    case DType::I64:
      return DatType::I64;
    case DType::E4M3:
      return DatType::E4M3;
    case DType::E2M1x2:
      return DatType::E2M1x2;
  }
  NVFP4LM_ASSERT(false, "dtype {} has no .dat element type", dtype_name(dtype));
}

void append_leb128(std::string& out, uint64_t value) {
  do {
    uint8_t byte = value & 0x7F;
    value >>= 7;
    if (value) byte |= 0x80;
    out.push_back(static_cast<char>(byte));
  } while (value);
}

// ---- reader ---------------------------------------------------------------------------------------------------

std::shared_ptr<DatFile> DatFile::open(const fs::path& path) {
  auto result = std::make_shared<DatFile>();
  result->file_ = MappedFile::open(path);
  const std::string file = path.string();
  Scanner scan(result->file_->data(), result->file_->size(), path);

  const uint64_t count = scan.leb128("entry count");
  NVFP4LM_CHECK(count <= scan.remaining() / kMinEntryBytes,
                "{}: entry count {} at byte offset 0 cannot fit in the {} bytes that follow; the file is truncated or "
                "not a .dat file",
                file, count, scan.remaining());
  // Bounded: a corrupt count that still "fits" a large file must not reserve gigabytes up front.
  result->entries_.reserve(static_cast<size_t>(std::min<uint64_t>(count, 4096)));
  for (uint64_t i = 0; i < count; ++i) {
    DatEntry entry;
    entry.index = static_cast<size_t>(i);
    const std::string label = fmt::format("entry {}", i);
    const uint64_t key_offset = scan.position();
    const uint64_t key_bytes = scan.leb128(label + " key length");
    NVFP4LM_CHECK(key_bytes > 0 && key_bytes <= kMaxKeyBytes, "{}: {} at byte offset {}: key length {} is not in 1..{}",
                  file, label, key_offset, key_bytes, kMaxKeyBytes);
    NVFP4LM_CHECK(key_bytes <= scan.remaining(),
                  "{}: {} at byte offset {}: key of {} bytes runs past the end of the file (truncated)", file, label,
                  key_offset, key_bytes);
    entry.key.assign(reinterpret_cast<const char*>(result->file_->data() + scan.position()),
                     static_cast<size_t>(key_bytes));
    NVFP4LM_CHECK(valid_utf8(entry.key), "{}: {} at byte offset {}: key is not valid UTF-8", file, label, key_offset);
    scan.skip(key_bytes);
    const std::string named = fmt::format("entry {} ('{}')", i, entry.key);

    const uint64_t type_offset = scan.position();
    const uint64_t type_code = scan.leb128(named + " element type");
    const auto type = dat_type_from_code(type_code);
    NVFP4LM_CHECK(type.has_value(),
                  "{}: {} at byte offset {}: unknown element type {} (known: 0 u8, 1 i8, 2 i16, 3 i32, 4 i64, 5 f16, "
                  "6 f32, 7 f64, 11 bool, 15 bf16, 100 e2m1x2, 101 e4m3)",
                  file, named, type_offset, type_code);
    entry.type = *type;
    const uint64_t ndim_offset = scan.position();
    const uint64_t ndim = scan.leb128(named + " ndim");
    NVFP4LM_CHECK(ndim <= kMaxDims, "{}: {} at byte offset {}: {} dimensions (at most {} are supported)", file, named,
                  ndim_offset, ndim, kMaxDims);
    for (uint64_t d = 0; d < ndim; ++d) {
      const uint64_t dim_offset = scan.position();
      const uint64_t dim = scan.leb128(fmt::format("{} dim {}", named, d));
      NVFP4LM_CHECK(dim <= kMaxFileTensorElements, "{}: {} at byte offset {}: dimension {} is absurd", file, named,
                    dim_offset, dim);
      entry.dims.push_back(static_cast<int64_t>(dim));
    }
    const auto numel = checked_numel(entry.dims);
    NVFP4LM_CHECK(numel.has_value(), "{}: {} at byte offset {}: shape {} has more than 2^50 elements", file, named,
                  ndim_offset, fmt::format("[{}]", fmt::join(entry.dims, ", ")));
    entry.bytes = *numel * dat_type_bytes(entry.type);
    entry.offset = scan.position();
    NVFP4LM_CHECK(entry.bytes <= scan.remaining(),
                  "{}: {} at byte offset {}: {} {} needs {} payload bytes but only {} remain (truncated)", file, named,
                  entry.offset, dat_type_name(entry.type), fmt::format("[{}]", fmt::join(entry.dims, ", ")),
                  entry.bytes, scan.remaining());
    scan.skip(entry.bytes);
    auto [it, inserted] = result->index_.emplace(entry.key, result->entries_.size());
    NVFP4LM_CHECK(inserted, "{}: {} repeats the key of entry {}", file, named, it->second);
    result->entries_.push_back(std::move(entry));
  }
  NVFP4LM_CHECK(scan.remaining() == 0,
                "{}: {} unexpected bytes after the last entry (byte offset {}); the file is corrupt", file,
                scan.remaining(), scan.position());
  return result;
}

const DatEntry* DatFile::find(std::string_view key) const {
  auto it = index_.find(std::string(key));
  return it == index_.end() ? nullptr : &entries_[it->second];
}

const DatEntry& DatFile::at(std::string_view key) const {
  const DatEntry* entry = find(key);
  NVFP4LM_CHECK(entry != nullptr, "{}: no entry '{}'", path().string(), key);
  return *entry;
}

Tensor DatFile::tensor(const DatEntry& entry) const {
  const uint8_t* data = bytes_of(entry);
  const uint64_t count = entry.bytes / dat_type_bytes(entry.type);
  const Shape shape = entry.shape();
  switch (entry.type) {
    case DatType::I16: {
      Tensor out = Tensor::empty(shape, DType::I32);
      convert_payload<int16_t>(data, out.data<int32_t>(), count, [](int16_t v) { return static_cast<int32_t>(v); });
      return out;
    }
    case DatType::F64: {
      Tensor out = Tensor::empty(shape, DType::F32);
      convert_payload<double>(data, out.data<float>(), count, [](double v) { return static_cast<float>(v); });
      return out;
    }
    case DatType::Bool: {
      Tensor out = Tensor::empty(shape, DType::U8);
      if (count) std::memcpy(out.raw(), data, count);
      return out;
    }
    default:
      break;
  }
  DType dtype = DType::U8;
  switch (entry.type) {
    case DatType::U8:
      dtype = DType::U8;
      break;
    case DatType::I8:
      dtype = DType::I8;
      break;
    case DatType::I32:
      dtype = DType::I32;
      break;
    case DatType::I64:
      dtype = DType::I64;
      break;
    case DatType::F16:
      dtype = DType::F16;
      break;
    case DatType::F32:
      dtype = DType::F32;
      break;
    case DatType::BF16:
      dtype = DType::BF16;
      break;
    case DatType::E2M1x2:
      dtype = DType::E2M1x2;
      break;
    case DatType::E4M3:
      dtype = DType::E4M3;
      break;
    default:
      break;
  }
  if (entry.bytes > 0 && reinterpret_cast<uintptr_t>(data) % dtype_bytes(dtype) == 0)
    return Tensor::external(const_cast<uint8_t*>(data), shape, dtype, Device::cpu(), file_);
  Tensor out = Tensor::empty(shape, dtype);
  if (entry.bytes) std::memcpy(out.raw(), data, static_cast<size_t>(entry.bytes));
  return out;
}

// ---- writer ---------------------------------------------------------------------------------------------------

namespace {
const fs::path& checked_output(const fs::path& path, bool overwrite) {
  check_replaceable(path, "output", OutputKind::File, overwrite);
  return path;
}
}  // namespace

DatWriter::DatWriter(const fs::path& path, uint64_t entry_count, bool overwrite)
    : out_(checked_output(path, overwrite), overwrite), entry_count_(entry_count) {
  std::string header;
  append_leb128(header, entry_count);
  out_.write(header);
}

void DatWriter::check_previous_complete() {
  NVFP4LM_CHECK(remaining_ == 0, "{}: entry '{}' is missing {} payload bytes", path().string(), current_key_,
                remaining_);
}

void DatWriter::begin_entry(const std::string& key, DatType type, const std::vector<int64_t>& dims) {
  NVFP4LM_CHECK(!finished_, "{}: entry '{}' after finish()", path().string(), key);
  check_previous_complete();
  NVFP4LM_CHECK(entries_begun_ < entry_count_, "{}: entry '{}' is one more than the {} declared", path().string(), key,
                entry_count_);
  NVFP4LM_CHECK(!key.empty() && key.size() <= kMaxKeyBytes && valid_utf8(key), "{}: invalid key '{}'", path().string(),
                key);
  NVFP4LM_CHECK(keys_.insert(key).second, "{}: key '{}' written twice", path().string(), key);
  NVFP4LM_CHECK(dims.size() <= kMaxDims, "{}: entry '{}' has {} dims (at most {})", path().string(), key, dims.size(),
                kMaxDims);
  const auto numel = checked_numel(dims);
  NVFP4LM_CHECK(numel.has_value(), "{}: entry '{}' has an invalid shape", path().string(), key);
  std::string header;
  append_leb128(header, key.size());
  header += key;
  append_leb128(header, static_cast<uint64_t>(type));
  append_leb128(header, dims.size());
  for (int64_t dim : dims) append_leb128(header, static_cast<uint64_t>(dim));
  out_.write(header);
  ++entries_begun_;
  current_key_ = key;
  remaining_ = *numel * dat_type_bytes(type);
}

void DatWriter::write_bytes(const void* data, uint64_t bytes) {
  NVFP4LM_CHECK(bytes <= remaining_, "{}: entry '{}' gets {} bytes but only {} remain", path().string(), current_key_,
                bytes, remaining_);
  out_.write(data, bytes);
  remaining_ -= bytes;
}

void DatWriter::write(const std::string& key, const Tensor& tensor) {
  NVFP4LM_CHECK(tensor.defined() && tensor.device().is_cpu(), "{}: entry '{}' must be a CPU tensor", path().string(),
                key);
  begin_entry(key, dat_type_of(tensor.dtype()), tensor.shape().to_vector());
  const Tensor contiguous = tensor.contiguous();
  write_bytes(contiguous.raw(), contiguous.nbytes());
}

void DatWriter::finish() {
  NVFP4LM_CHECK(!finished_, "{}: finish() called twice", path().string());
  check_previous_complete();
  NVFP4LM_CHECK(entries_begun_ == entry_count_, "{}: {} entries written but {} declared", path().string(),
                entries_begun_, entry_count_);
  out_.commit();
  finished_ = true;
}

}  // namespace nvfp4lm
