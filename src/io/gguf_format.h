// The GGUF container (version 3, as llama.cpp and gguf-py write it) and the ggml tensor types nvfp4lm writes.
//
// File: "GGUF" magic, u32 version 3, u64 tensor count, u64 metadata count; metadata entries (key string, u32 value
// type, value); tensor infos (name string, u32 rank, rank x u64 dims with dims[0] the fastest-varying, u32 ggml
// type, u64 offset into the data section); zero padding to `general.alignment` (default 32); the data section,
// each tensor starting at a multiple of the alignment. Strings are u64 length + UTF-8 bytes (no terminator); all
// integers little-endian. A PyTorch [out, in] weight is a GGUF tensor of dims {in, out}, same bytes.
//
// Quantized types store rows as blocks (ggml-common.h layouts, re-derived here; io/gguf_quants.h codes them):
//   Q4_0  32 elements, 18 bytes: f16 scale d, 16 bytes; byte j = element j (low nibble) | element j+16 (high);
//         value = (nibble - 8) * d.
//   Q8_0  32 elements, 34 bytes: f16 d, 32 int8; value = q * d.
//   Q6_K  256 elements, 210 bytes: ql[128] (low 4 bits), qh[64] (high 2 bits), int8 scales[16] (one per 16),
//         f16 d; value = d * scale * (q - 32).
//   NVFP4 64 elements, 36 bytes: 4 UE4M3 scales (one per 16 elements; the E4M3 byte without its sign bit), then
//         32 code bytes, 8 per 16-element group: byte j holds element j (low nibble) and j+8 (high). ggml decodes
//         an E2M1 code as twice its value (kvalues_mxfp4) times half the scale, so value = e2m1 * e4m3, as ours.
//         The per-tensor scale is not part of the block: it is a separate F32 tensor "<name>.scale" of one element
//         that llama.cpp multiplies into the matmul's output (how its converter carries ModelOpt's weight_scale_2).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace nvfp4lm::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
inline constexpr uint32_t kVersion = 3;
inline constexpr uint64_t kDefaultAlignment = 32;
// `offset` rounded up to a multiple of `alignment`: where the data section and each tensor start.
constexpr uint64_t align_up(uint64_t offset, uint64_t alignment) {
  return (offset + alignment - 1) / alignment * alignment;
}

// The name of an NVFP4 weight's F32 tensor scale (above): "blk.0.attn_q.weight" -> "blk.0.attn_q.scale". The writer
// and the reader pair them by this; an Error when the name does not end in ".weight".
std::string nvfp4_tensor_scale_name(std::string_view weight_name);

enum class ValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
std::string_view value_type_name(ValueType type);
// Bytes of one scalar of `type` (0 for String and Array, which have variable size).
uint64_t value_type_bytes(ValueType type);

// The ggml tensor types nvfp4lm writes and reads (values are ggml's enum ggml_type).
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q8_0 = 8,
  Q6_K = 14,
  BF16 = 30,
  NVFP4 = 40,
};
std::string_view ggml_type_name(GgmlType type);  // "f32", "q4_0", "nvfp4", ... (ggml's names)
std::optional<GgmlType> ggml_type_from_id(uint32_t id);
std::optional<GgmlType> ggml_type_from_name(std::string_view name);

struct BlockLayout {
  int64_t elements;  // per block (1 for the float types)
  int64_t bytes;     // per block
};
BlockLayout block_layout(GgmlType type);

// Any ggml type a GGUF file may hold (those above and ggml's other quantizations, by their block layouts), so
// the reader can check and describe files nvfp4lm did not write. nullopt for ids it does not know.
struct AnyTypeInfo {
  std::string_view name;
  BlockLayout layout;
};
std::optional<AnyTypeInfo> any_type_info(uint32_t id);
// Bytes of a row of `elements` (a multiple of the block size: an Error otherwise, naming `what`).
uint64_t row_bytes(GgmlType type, int64_t elements, std::string_view what);

// llama.cpp's general.file_type (enum llama_ftype) for a model whose large matrices are `type`.
uint32_t llama_file_type(GgmlType type);

// llama.cpp's token types (tokenizer.ggml.token_type).
enum class TokenType : int32_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

}  // namespace nvfp4lm::gguf
