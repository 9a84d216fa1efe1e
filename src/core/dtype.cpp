#include "core/dtype.h"

#include "core/error.h"

namespace nvfp4lm {

size_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return 4;
    case DType::BF16:
      return 2;
    case DType::F16:
      return 2;
    case DType::U8:
      return 1;
    case DType::I8:
      return 1;
    case DType::I32:
      return 4;
    case DType::I64:
      return 8;
    case DType::E4M3:
      return 1;
    case DType::E2M1x2:
      return 1;
  }
  NVFP4LM_ASSERT(false, "unknown dtype {}", static_cast<int>(dtype));
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "F32";
    case DType::BF16:
      return "BF16";
    case DType::F16:
      return "F16";
    case DType::U8:
      return "U8";
    case DType::I8:
      return "I8";
    case DType::I32:
      return "I32";
    case DType::I64:
      return "I64";
    case DType::E4M3:
      return "F8_E4M3";
    case DType::E2M1x2:
      return "E2M1x2";
  }
  return "?";
}

bool dtype_is_float(DType dtype) { return dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16; }

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  if (name == "F32") return DType::F32;
  if (name == "BF16") return DType::BF16;
  if (name == "F16") return DType::F16;
  if (name == "U8") return DType::U8;
  if (name == "I8") return DType::I8;
  if (name == "I32") return DType::I32;
  if (name == "I64") return DType::I64;
  if (name == "F8_E4M3") return DType::E4M3;
  return std::nullopt;
}

std::string_view dtype_to_safetensors(DType dtype) {
  return dtype == DType::E2M1x2 ? std::string_view("U8") : dtype_name(dtype);
}

}  // namespace nvfp4lm
