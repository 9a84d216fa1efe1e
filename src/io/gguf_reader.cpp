// See gguf_reader.h. One forward pass with a bounds-checked cursor; the tensor table is checked as a whole at the
// end (offsets, overlaps), once the data section's start is known.
#include "io/gguf_reader.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <unordered_set>

#include "core/error.h"
#include "core/mapped_file.h"

namespace nvfp4lm {
namespace {

using gguf::ValueType;

constexpr int kMaxRank = 4;
constexpr uint64_t kMinValueBytes = 1;      // the smallest element (u8, i8, bool)
constexpr uint64_t kMinKeyValueBytes = 13;  // key length (8) + one key byte + value type (4)
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;
// Parsed metadata costs far more than its bytes (8 bytes a u8 element, 32 a string): a crafted 128 MB file of one
// u8 array took 1.19 GB. Real files hold ~0.5 M elements (three 151,936-entry tokenizer arrays for Qwen3; 256 K
// vocabularies ~0.8 M) and hundreds to a few thousand tensors; these limits are 5x and more above that.
constexpr uint64_t kMaxMetadataElements = uint64_t{1} << 22;
constexpr uint64_t kMaxTensors = uint64_t{1} << 20;

class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size, const std::string& origin) : data_(data), size_(size), origin_(origin) {}

  uint64_t position() const { return position_; }
  uint64_t left() const { return size_ - position_; }

  void need(uint64_t bytes, std::string_view what) const {
    NVFP4LM_CHECK(bytes <= left(), "{}: {} needs {} bytes at offset {}, but the file ends {} bytes later (truncated?)",
                  origin_, what, bytes, position_, left());
  }
  template <class T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, data_ + position_, sizeof(T));
    position_ += sizeof(T);
    return value;
  }
  std::string read_string(std::string_view what) {
    const auto length = read<uint64_t>(what);
    need(length, what);
    std::string text(reinterpret_cast<const char*>(data_ + position_), static_cast<size_t>(length));
    position_ += length;
    return text;
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t position_ = 0;
  const std::string& origin_;
};

bool valid_value_type(uint32_t id) { return id <= static_cast<uint32_t>(ValueType::F64); }

// Appends one element of `type` to `value`.
void read_element(Cursor& cursor, ValueType type, GgufValue& value, const std::string& what) {
  switch (type) {
    case ValueType::U8:
      value.unsigned_values.push_back(cursor.read<uint8_t>(what));
      return;
    case ValueType::Bool: {
      const auto byte = cursor.read<uint8_t>(what);
      NVFP4LM_CHECK(byte <= 1, "{}: bool value {} (must be 0 or 1)", what, byte);
      value.unsigned_values.push_back(byte);
      return;
    }
    case ValueType::U16:
      value.unsigned_values.push_back(cursor.read<uint16_t>(what));
      return;
    case ValueType::U32:
      value.unsigned_values.push_back(cursor.read<uint32_t>(what));
      return;
    case ValueType::U64:
      value.unsigned_values.push_back(cursor.read<uint64_t>(what));
      return;
    case ValueType::I8:
      value.signed_values.push_back(cursor.read<int8_t>(what));
      return;
    case ValueType::I16:
      value.signed_values.push_back(cursor.read<int16_t>(what));
      return;
    case ValueType::I32:
      value.signed_values.push_back(cursor.read<int32_t>(what));
      return;
    case ValueType::I64:
      value.signed_values.push_back(cursor.read<int64_t>(what));
      return;
    case ValueType::F32:
      value.float_values.push_back(cursor.read<float>(what));
      return;
    case ValueType::F64:
      value.float_values.push_back(cursor.read<double>(what));
      return;
    case ValueType::String:
      value.strings.push_back(cursor.read_string(what));
      return;
    case ValueType::Array:
      break;
  }
  NVFP4LM_FAIL("{}: arrays of arrays are not supported", what);
}

// `elements_left`: of kMaxMetadataElements, for the whole file; an array beyond it is an Error.
GgufValue read_value(Cursor& cursor, const std::string& origin, const std::string& key, uint64_t& elements_left) {
  const std::string what = fmt::format("{}: metadata '{}'", origin, key);
  const auto type_id = cursor.read<uint32_t>(what);
  NVFP4LM_CHECK(valid_value_type(type_id), "{}: unknown value type {}", what, type_id);
  GgufValue value;
  if (static_cast<ValueType>(type_id) != ValueType::Array) {
    value.type = static_cast<ValueType>(type_id);
    read_element(cursor, value.type, value, what);
    return value;
  }
  value.is_array = true;
  const auto element_id = cursor.read<uint32_t>(what);
  NVFP4LM_CHECK(valid_value_type(element_id), "{}: unknown array element type {}", what, element_id);
  value.type = static_cast<ValueType>(element_id);
  NVFP4LM_CHECK(value.type != ValueType::Array, "{}: arrays of arrays are not supported", what);
  const auto count = cursor.read<uint64_t>(what);
  // Every element takes at least one byte (a string eight), so a count beyond that is a lie, not an allocation.
  const uint64_t least = value.type == ValueType::String ? 8 : gguf::value_type_bytes(value.type);
  NVFP4LM_CHECK(count <= cursor.left() / std::max(least, kMinValueBytes),
                "{}: an array of {} {} elements does not fit in the {} bytes left", what, count,
                gguf::value_type_name(value.type), cursor.left());
  NVFP4LM_CHECK(count <= elements_left,
                "{}: an array of {} elements takes the file's metadata past {} array elements, more than any model "
                "needs; nvfp4lm does not read it",
                what, count, kMaxMetadataElements);
  elements_left -= count;
  for (uint64_t i = 0; i < count; ++i) read_element(cursor, value.type, value, what);
  return value;
}

}  // namespace

size_t GgufValue::size() const {
  return unsigned_values.size() + signed_values.size() + float_values.size() + strings.size();
}

std::optional<std::string_view> GgufValue::string(size_t i) const {
  if (type != ValueType::String || i >= strings.size()) return std::nullopt;
  return strings[i];
}

std::optional<int64_t> GgufValue::integer(size_t i) const {
  if (i < signed_values.size()) return signed_values[i];
  if (i < unsigned_values.size() && type != ValueType::Bool &&
      unsigned_values[i] <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return static_cast<int64_t>(unsigned_values[i]);
  return std::nullopt;
}

std::optional<double> GgufValue::number(size_t i) const {
  if (i < float_values.size()) return float_values[i];
  if (const auto whole = integer(i)) return static_cast<double>(*whole);
  return std::nullopt;
}

std::string GgufValue::describe() const {
  if (is_array) return fmt::format("array of {} {}", size(), gguf::value_type_name(type));
  if (type == ValueType::String) {
    const std::string& text = strings.at(0);
    return fmt::format("string \"{}{}\"", text.substr(0, 60), text.size() > 60 ? "..." : "");
  }
  if (type == ValueType::Bool) return unsigned_values.at(0) ? "bool true" : "bool false";
  if (!float_values.empty()) return fmt::format("{} {}", gguf::value_type_name(type), float_values[0]);
  if (!signed_values.empty()) return fmt::format("{} {}", gguf::value_type_name(type), signed_values[0]);
  return fmt::format("{} {}", gguf::value_type_name(type), unsigned_values.at(0));
}

bool starts_with_gguf_magic(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;  // not a FIFO: reading one could block
  std::ifstream in(path, std::ios::binary);
  uint32_t magic = 0;
  return in.read(reinterpret_cast<char*>(&magic), sizeof magic) && magic == gguf::kMagic;
}

GgufFile GgufFile::open(const fs::path& path) {
  std::shared_ptr<MappedFile> mapping = MappedFile::open(path);
  GgufFile file = parse(mapping->data(), mapping->size(), path.string());
  file.mapping_ = std::move(mapping);
  return file;
}

GgufFile GgufFile::parse(const uint8_t* data, uint64_t size, const std::string& origin) {
  GgufFile file;
  file.data_ = data;
  file.size_ = size;
  file.origin_ = origin;
  Cursor cursor(data, size, file.origin_);
  const auto magic = cursor.read<uint32_t>("the GGUF magic");
  NVFP4LM_CHECK(magic == gguf::kMagic, "{}: not a GGUF file (magic 0x{:08X}, expected \"GGUF\")", origin, magic);
  file.version_ = cursor.read<uint32_t>("the GGUF version");
  NVFP4LM_CHECK(file.version_ == 2 || file.version_ == 3,
                "{}: GGUF version {} is not supported (2 and 3 are; version 1 files predate 2023-08 and need "
                "conversion)",
                origin, file.version_);
  const auto tensor_count = cursor.read<uint64_t>("the tensor count");
  const auto metadata_count = cursor.read<uint64_t>("the metadata count");
  NVFP4LM_CHECK(metadata_count <= cursor.left() / kMinKeyValueBytes,
                "{}: {} metadata entries cannot fit in a file of {} bytes", origin, metadata_count, size);
  std::unordered_set<std::string> seen;
  uint64_t elements_left = kMaxMetadataElements;
  for (uint64_t i = 0; i < metadata_count; ++i) {
    std::string key = cursor.read_string(fmt::format("metadata key #{}", i));
    NVFP4LM_CHECK(!key.empty(), "{}: metadata key #{} is empty", origin, i);
    NVFP4LM_CHECK(seen.insert(key).second, "{}: metadata key '{}' appears twice", origin, key);
    GgufValue value = read_value(cursor, origin, key, elements_left);
    file.metadata_.emplace_back(std::move(key), std::move(value));
  }
  if (const GgufValue* alignment = file.find("general.alignment")) {
    NVFP4LM_CHECK(!alignment->is_array && alignment->type == ValueType::U32,
                  "{}: general.alignment must be a u32, got {}", origin, alignment->describe());
    const uint64_t value = alignment->unsigned_values[0];
    NVFP4LM_CHECK(value > 0 && (value & (value - 1)) == 0, "{}: general.alignment {} is not a power of two", origin,
                  value);
    file.alignment_ = value;
  }

  NVFP4LM_CHECK(tensor_count <= cursor.left() / kMinTensorInfoBytes, "{}: {} tensors cannot fit in a file of {} bytes",
                origin, tensor_count, size);
  NVFP4LM_CHECK(tensor_count <= kMaxTensors, "{}: {} tensors, more than the {} nvfp4lm reads", origin, tensor_count,
                kMaxTensors);
  std::vector<uint64_t> relative_offsets;
  seen.clear();
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo tensor;
    tensor.name = cursor.read_string(fmt::format("the name of tensor #{}", i));
    const std::string what = fmt::format("{}: tensor '{}'", origin, tensor.name);
    NVFP4LM_CHECK(!tensor.name.empty(), "{}: tensor #{} has an empty name", origin, i);
    NVFP4LM_CHECK(seen.insert(tensor.name).second, "{} appears twice", what);
    const auto rank = cursor.read<uint32_t>(what);
    NVFP4LM_CHECK(rank >= 1 && rank <= kMaxRank, "{} has rank {} (1..{})", what, rank, kMaxRank);
    std::vector<int64_t> dims(rank);
    int64_t numel = 1;
    int64_t nonzero_product = 1;  // zero dims do not excuse the others: [0, 2^40, 2^40] is refused like its product
    for (uint32_t d = 0; d < rank; ++d) {
      const auto dim = cursor.read<uint64_t>(what);
      NVFP4LM_CHECK(dim <= static_cast<uint64_t>(Shape::kMaxNumel) &&
                        (dim == 0 || nonzero_product <= Shape::kMaxNumel / static_cast<int64_t>(dim)),
                    "{} has more than 2^56 elements", what);
      numel *= static_cast<int64_t>(dim);
      if (dim != 0) nonzero_product *= static_cast<int64_t>(dim);
      dims[rank - 1 - d] = static_cast<int64_t>(dim);  // the file lists the fastest dimension first
    }
    tensor.shape = Shape(dims);
    tensor.type_id = cursor.read<uint32_t>(what);
    const std::optional<gguf::AnyTypeInfo> type = gguf::any_type_info(tensor.type_id);
    NVFP4LM_CHECK(type.has_value(), "{} has ggml type {}, which nvfp4lm does not know", what, tensor.type_id);
    tensor.type = type->name;
    const int64_t inner = dims.back();
    NVFP4LM_CHECK(inner % type->layout.elements == 0, "{}: rows of {} elements are not whole {} blocks of {}", what,
                  inner, tensor.type, type->layout.elements);
    // numel <= 2^56 and bytes per element <= 8, so this cannot overflow.
    tensor.bytes = static_cast<uint64_t>(numel / type->layout.elements) * static_cast<uint64_t>(type->layout.bytes);
    relative_offsets.push_back(cursor.read<uint64_t>(what));
    NVFP4LM_CHECK(relative_offsets.back() % file.alignment_ == 0, "{}: data offset {} is not a multiple of {}", what,
                  relative_offsets.back(), file.alignment_);
    file.tensors_.push_back(std::move(tensor));
  }

  const uint64_t data_start = gguf::align_up(cursor.position(), file.alignment_);
  for (size_t i = 0; i < file.tensors_.size(); ++i) {
    GgufTensorInfo& tensor = file.tensors_[i];
    NVFP4LM_CHECK(data_start <= size && relative_offsets[i] <= size - data_start &&
                      tensor.bytes <= size - data_start - relative_offsets[i],
                  "{}: tensor '{}' ({} bytes at data offset {}) ends past the end of the file ({} bytes; data starts "
                  "at {})",
                  origin, tensor.name, tensor.bytes, relative_offsets[i], size, data_start);
    tensor.file_offset = data_start + relative_offsets[i];
  }
  std::vector<const GgufTensorInfo*> by_offset;
  for (const GgufTensorInfo& tensor : file.tensors_) by_offset.push_back(&tensor);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->file_offset < b->file_offset; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    NVFP4LM_CHECK(by_offset[i - 1]->file_offset + by_offset[i - 1]->bytes <= by_offset[i]->file_offset,
                  "{}: the data of tensors '{}' and '{}' overlap", origin, by_offset[i - 1]->name, by_offset[i]->name);
  return file;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  for (const auto& [name, value] : metadata_)
    if (name == key) return &value;
  return nullptr;
}

std::string_view GgufFile::string(std::string_view key) const {
  const GgufValue* value = find(key);
  NVFP4LM_CHECK(value != nullptr && !value->is_array && value->string(), "{}: metadata '{}' is {}, expected a string",
                origin_, key, value ? value->describe() : "missing");
  return *value->string();
}

int64_t GgufFile::integer(std::string_view key) const {
  const GgufValue* value = find(key);
  NVFP4LM_CHECK(value != nullptr && !value->is_array && value->integer(),
                "{}: metadata '{}' is {}, expected an integer", origin_, key, value ? value->describe() : "missing");
  return *value->integer();
}

double GgufFile::number(std::string_view key) const {
  const GgufValue* value = find(key);
  NVFP4LM_CHECK(value != nullptr && !value->is_array && value->number(), "{}: metadata '{}' is {}, expected a number",
                origin_, key, value ? value->describe() : "missing");
  return *value->number();
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  for (const GgufTensorInfo& tensor : tensors_)
    if (tensor.name == name) return &tensor;
  return nullptr;
}

}  // namespace nvfp4lm
