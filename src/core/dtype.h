// Element types. Sizes are per stored element; E2M1x2 is one byte holding two FP4 (E2M1) codes
// (element 2i in the low nibble, 2i+1 in the high nibble), so a tensor of E2M1x2 has shape in bytes
// ([rows, cols/2] for a [rows, cols] weight). E4M3 is the OCP FP8 "fn" variant (max 448, no inf).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace nvfp4lm {

enum class DType : uint8_t { F32, BF16, F16, U8, I8, I32, I64, E4M3, E2M1x2 };

// Bytes per stored element.
size_t dtype_bytes(DType dtype);
// Display name; for types safetensors knows, this is also the safetensors name (E4M3 -> F8_E4M3).
std::string_view dtype_name(DType dtype);
bool dtype_is_float(DType dtype);  // F32, BF16, F16

// safetensors dtype strings. E2M1x2 is stored as U8 in safetensors; the caller decides which it is.
std::optional<DType> dtype_from_safetensors(std::string_view name);
std::string_view dtype_to_safetensors(DType dtype);

}  // namespace nvfp4lm
