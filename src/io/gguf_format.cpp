// See gguf_format.h.
#include "io/gguf_format.h"

#include <array>

#include "core/error.h"

namespace nvfp4lm::gguf {
namespace {

struct TypeRow {
  GgmlType type;
  std::string_view name;
  BlockLayout layout;
  uint32_t file_type;  // llama_ftype "mostly <type>"
};

constexpr std::array<TypeRow, 7> kTypes = {{
    {GgmlType::F32, "f32", {1, 4}, 0},
    {GgmlType::F16, "f16", {1, 2}, 1},
    {GgmlType::Q4_0, "q4_0", {32, 18}, 2},
    {GgmlType::Q8_0, "q8_0", {32, 34}, 7},
    {GgmlType::Q6_K, "q6_K", {256, 210}, 18},
    {GgmlType::BF16, "bf16", {1, 2}, 32},
    {GgmlType::NVFP4, "nvfp4", {64, 36}, 39},
}};

struct AnyTypeRow {
  uint32_t id;
  AnyTypeInfo info;
};

// ggml's types that nvfp4lm does not write, with their block sizes (ggml-common.h): for reading only.
constexpr std::array<AnyTypeRow, 26> kOtherTypes = {{
    {3, {"q4_1", {32, 20}}},      {6, {"q5_0", {32, 22}}},      {7, {"q5_1", {32, 24}}},
    {9, {"q8_1", {32, 36}}},      {10, {"q2_K", {256, 84}}},    {11, {"q3_K", {256, 110}}},
    {12, {"q4_K", {256, 144}}},   {13, {"q5_K", {256, 176}}},   {15, {"q8_K", {256, 292}}},
    {16, {"iq2_xxs", {256, 66}}}, {17, {"iq2_xs", {256, 74}}},  {18, {"iq3_xxs", {256, 98}}},
    {19, {"iq1_s", {256, 50}}},   {20, {"iq4_nl", {32, 18}}},   {21, {"iq3_s", {256, 110}}},
    {22, {"iq2_s", {256, 82}}},   {23, {"iq4_xs", {256, 136}}}, {24, {"i8", {1, 1}}},
    {25, {"i16", {1, 2}}},        {26, {"i32", {1, 4}}},        {27, {"i64", {1, 8}}},
    {28, {"f64", {1, 8}}},        {29, {"iq1_m", {256, 56}}},   {34, {"tq1_0", {256, 54}}},
    {35, {"tq2_0", {256, 66}}},   {39, {"mxfp4", {32, 17}}},
}};

const TypeRow& row_of(GgmlType type) {
  for (const TypeRow& row : kTypes)
    if (row.type == type) return row;
  NVFP4LM_FAIL("ggml type {} is not one nvfp4lm handles", static_cast<uint32_t>(type));
}

}  // namespace

std::string_view value_type_name(ValueType type) {
  switch (type) {
    case ValueType::U8:
      return "u8";
    case ValueType::I8:
      return "i8";
    case ValueType::U16:
      return "u16";
    case ValueType::I16:
      return "i16";
    case ValueType::U32:
      return "u32";
    case ValueType::I32:
      return "i32";
    case ValueType::F32:
      return "f32";
    case ValueType::Bool:
      return "bool";
    case ValueType::String:
      return "string";
    case ValueType::Array:
      return "array";
    case ValueType::U64:
      return "u64";
    case ValueType::I64:
      return "i64";
    case ValueType::F64:
      return "f64";
  }
  return "?";
}

uint64_t value_type_bytes(ValueType type) {
  switch (type) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::Bool:
      return 1;
    case ValueType::U16:
    case ValueType::I16:
      return 2;
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::F32:
      return 4;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64:
      return 8;
    case ValueType::String:
    case ValueType::Array:
      return 0;
  }
  return 0;
}

std::string_view ggml_type_name(GgmlType type) { return row_of(type).name; }

std::optional<GgmlType> ggml_type_from_id(uint32_t id) {
  for (const TypeRow& row : kTypes)
    if (static_cast<uint32_t>(row.type) == id) return row.type;
  return std::nullopt;
}

std::optional<GgmlType> ggml_type_from_name(std::string_view name) {
  for (const TypeRow& row : kTypes)
    if (row.name == name) return row.type;
  return std::nullopt;
}

BlockLayout block_layout(GgmlType type) { return row_of(type).layout; }

std::optional<AnyTypeInfo> any_type_info(uint32_t id) {
  for (const TypeRow& row : kTypes)
    if (static_cast<uint32_t>(row.type) == id) return AnyTypeInfo{row.name, row.layout};
  for (const AnyTypeRow& row : kOtherTypes)
    if (row.id == id) return row.info;
  return std::nullopt;
}

uint64_t row_bytes(GgmlType type, int64_t elements, std::string_view what) {
  const BlockLayout layout = block_layout(type);
  NVFP4LM_CHECK(elements >= 0 && elements % layout.elements == 0,
                "{}: a row of {} elements cannot be stored as {} (blocks of {} elements)", what, elements,
                ggml_type_name(type), layout.elements);
  return static_cast<uint64_t>(elements / layout.elements) * static_cast<uint64_t>(layout.bytes);
}

uint32_t llama_file_type(GgmlType type) { return row_of(type).file_type; }

std::string nvfp4_tensor_scale_name(std::string_view weight_name) {
  constexpr std::string_view kSuffix = ".weight";
  NVFP4LM_CHECK(weight_name.ends_with(kSuffix), "GGUF tensor '{}': an NVFP4 weight's name ends in \".weight\"",
                weight_name);
  return std::string(weight_name.substr(0, weight_name.size() - kSuffix.size())) + ".scale";
}

}  // namespace nvfp4lm::gguf
