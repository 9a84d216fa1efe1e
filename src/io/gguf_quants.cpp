// See gguf_quants.h. Every codec works block by block on plain byte arrays (little-endian, as GGUF stores them).
#include "io/gguf_quants.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/numeric.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"

namespace nvfp4lm::gguf {
namespace {

constexpr int kQ4Block = 32, kQ8Block = 32, kQ6Block = 256, kNvfp4Block = 64, kGroup = 16;

void store_f16(uint8_t* dst, float value) {
  const uint16_t half = float_to_f16(value);
  std::memcpy(dst, &half, 2);
}

float load_f16(const uint8_t* src) {
  uint16_t half;
  std::memcpy(&half, src, 2);
  return f16_to_float(half);
}

// ---- Q8_0: f16 d, 32 x int8 --------------------------------------------------------------------------------------
void encode_q8_0(const float* x, uint8_t* block) {
  float amax = 0;
  for (int j = 0; j < kQ8Block; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float inverse = d != 0 ? 1.0f / d : 0.0f;
  store_f16(block, d);
  for (int j = 0; j < kQ8Block; ++j)
    block[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::round(x[j] * inverse)));
}

void decode_q8_0(const uint8_t* block, float* y) {
  const float d = load_f16(block);
  for (int j = 0; j < kQ8Block; ++j) y[j] = static_cast<float>(static_cast<int8_t>(block[2 + j])) * d;
}

// ---- Q4_0: f16 d, 16 bytes; byte j = element j | element j+16 << 4; value (q - 8) * d -----------------------------
void encode_q4_0(const float* x, uint8_t* block) {
  float amax = 0, max = 0;
  for (int j = 0; j < kQ4Block; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8.0f;
  const float inverse = d != 0 ? 1.0f / d : 0.0f;
  store_f16(block, d);
  auto code = [&](float v) { return static_cast<uint8_t>(std::min(15.0f, std::floor(v * inverse + 8.5f))); };
  for (int j = 0; j < kQ4Block / 2; ++j)
    block[2 + j] = static_cast<uint8_t>(code(x[j]) | (code(x[j + kQ4Block / 2]) << 4));
}

void decode_q4_0(const uint8_t* block, float* y) {
  const float d = load_f16(block);
  for (int j = 0; j < kQ4Block / 2; ++j) {
    y[j] = static_cast<float>((block[2 + j] & 0xF) - 8) * d;
    y[j + kQ4Block / 2] = static_cast<float>((block[2 + j] >> 4) - 8) * d;
  }
}

// ---- Q6_K: ql[128], qh[64], int8 scales[16], f16 d ----------------------------------------------------------------
// Element e of a half h (e in [0, 128)) is code L = q + 32 (6 bits): its low 4 bits are in ql[h*64 + e % 64] (low
// nibble for e < 64, high nibble otherwise), its high 2 bits in qh[h*32 + e % 32] at bit 2 * (e / 32).
void encode_q6_k(const float* x, uint8_t* block) {
  float group_scale[kQ6Block / kGroup];
  float max_scale = 0;
  for (int g = 0; g < kQ6Block / kGroup; ++g) {
    float amax = 0;
    for (int j = 0; j < kGroup; ++j) amax = std::max(amax, std::fabs(x[g * kGroup + j]));
    group_scale[g] = amax / 31.0f;
    max_scale = std::max(max_scale, group_scale[g]);
  }
  uint8_t* ql = block;
  uint8_t* qh = block + 128;
  auto* scales = reinterpret_cast<int8_t*>(block + 192);
  store_f16(block + 208, max_scale / 127.0f);
  const float d = load_f16(block + 208);  // the scale the decoder will use
  uint8_t codes[kQ6Block];
  for (int g = 0; g < kQ6Block / kGroup; ++g) {
    const float scale = d != 0 ? std::min(127.0f, std::round(group_scale[g] / d)) : 0.0f;
    scales[g] = static_cast<int8_t>(scale);
    const float step = d * scale;
    for (int j = 0; j < kGroup; ++j) {
      const float q = step != 0 ? std::clamp(std::round(x[g * kGroup + j] / step), -32.0f, 31.0f) : 0.0f;
      codes[g * kGroup + j] = static_cast<uint8_t>(static_cast<int>(q) + 32);
    }
  }
  std::memset(ql, 0, 128 + 64);
  for (int e = 0; e < kQ6Block; ++e) {
    const int half = e / 128, in_half = e % 128;
    ql[half * 64 + in_half % 64] |= static_cast<uint8_t>((codes[e] & 0xF) << (in_half < 64 ? 0 : 4));
    qh[half * 32 + in_half % 32] |= static_cast<uint8_t>((codes[e] >> 4) << (2 * (in_half / 32)));
  }
}

void decode_q6_k(const uint8_t* block, float* y) {
  const uint8_t* ql = block;
  const uint8_t* qh = block + 128;
  const auto* scales = reinterpret_cast<const int8_t*>(block + 192);
  const float d = load_f16(block + 208);
  for (int e = 0; e < kQ6Block; ++e) {
    const int half = e / 128, in_half = e % 128;
    const int low = (ql[half * 64 + in_half % 64] >> (in_half < 64 ? 0 : 4)) & 0xF;
    const int high = (qh[half * 32 + in_half % 32] >> (2 * (in_half / 32))) & 3;
    y[e] = d * static_cast<float>(scales[e / kGroup]) * static_cast<float>((low | (high << 4)) - 32);
  }
}

// ---- NVFP4: 4 UE4M3 scales, then per 16-element group 8 bytes with element j low and j + 8 high -------------------
float ue4m3_to_float(uint8_t byte) { return (byte & 0x7F) == kE4M3NaN ? 0.0f : e4m3_to_float(byte & 0x7F); }

void decode_nvfp4(const uint8_t* block, float* y) {
  for (int g = 0; g < kNvfp4Block / kGroup; ++g) {
    const float scale = ue4m3_to_float(block[g]);
    const uint8_t* bytes = block + 4 + g * (kGroup / 2);
    for (int j = 0; j < kGroup / 2; ++j) {
      y[g * kGroup + j] = e2m1_to_float(bytes[j] & 0xF) * scale;
      y[g * kGroup + j + kGroup / 2] = e2m1_to_float(bytes[j] >> 4) * scale;
    }
  }
}

}  // namespace

void encode_row(GgmlType type, const float* values, int64_t count, uint8_t* dst) {
  const BlockLayout layout = block_layout(type);
  NVFP4LM_ASSERT(count % layout.elements == 0, "encode_row: {} values are not whole {} blocks", count,
                 ggml_type_name(type));
  const int64_t blocks = count / layout.elements;
  switch (type) {
    case GgmlType::F32:
      std::memcpy(dst, values, static_cast<size_t>(count) * 4);
      return;
    case GgmlType::F16:
      for (int64_t i = 0; i < count; ++i) store_f16(dst + 2 * i, values[i]);
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < count; ++i) {
        const uint16_t bits = float_to_bf16(values[i]);
        std::memcpy(dst + 2 * i, &bits, 2);
      }
      return;
    case GgmlType::Q8_0:
      for (int64_t b = 0; b < blocks; ++b) encode_q8_0(values + b * kQ8Block, dst + b * layout.bytes);
      return;
    case GgmlType::Q4_0:
      for (int64_t b = 0; b < blocks; ++b) encode_q4_0(values + b * kQ4Block, dst + b * layout.bytes);
      return;
    case GgmlType::Q6_K:
      for (int64_t b = 0; b < blocks; ++b) encode_q6_k(values + b * kQ6Block, dst + b * layout.bytes);
      return;
    case GgmlType::NVFP4:
      break;
  }
  NVFP4LM_FAIL("encode_row: {} is written from NVFP4 weights (repack_nvfp4_row), not from floats",
               ggml_type_name(type));
}

void decode_row(GgmlType type, const uint8_t* src, int64_t count, float* values) {
  const BlockLayout layout = block_layout(type);
  NVFP4LM_ASSERT(count % layout.elements == 0, "decode_row: {} values are not whole {} blocks", count,
                 ggml_type_name(type));
  const int64_t blocks = count / layout.elements;
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* block = src + b * layout.bytes;
    float* y = values + b * layout.elements;
    switch (type) {
      case GgmlType::F32:
        std::memcpy(y, block, 4);
        break;
      case GgmlType::F16:
        *y = load_f16(block);
        break;
      case GgmlType::BF16: {
        uint16_t bits;
        std::memcpy(&bits, block, 2);
        *y = bf16_to_float(bits);
        break;
      }
      case GgmlType::Q8_0:
        decode_q8_0(block, y);
        break;
      case GgmlType::Q4_0:
        decode_q4_0(block, y);
        break;
      case GgmlType::Q6_K:
        decode_q6_k(block, y);
        break;
      case GgmlType::NVFP4:
        decode_nvfp4(block, y);
        break;
    }
  }
}

void repack_nvfp4_row(const uint8_t* codes, const uint8_t* scales, int64_t cols, uint8_t* dst, const char* what) {
  NVFP4LM_CHECK(cols % kNvfp4Block == 0,
                "{}: {} columns cannot be stored as GGUF NVFP4 (ggml packs 64 elements a block); write this model "
                "with --gguf-type q8_0 or f16",
                what, cols);
  for (int64_t b = 0; b < cols / kNvfp4Block; ++b) {
    uint8_t* block = dst + b * 36;
    for (int g = 0; g < kNvfp4Block / kGroup; ++g) {
      const uint8_t scale = scales[b * 4 + g];
      NVFP4LM_CHECK((scale & 0x80) == 0,
                    "{}: block scale byte 0x{:02X} is negative; GGUF's NVFP4 scales are unsigned (UE4M3)", what, scale);
      block[g] = scale;
      // Our group: 8 bytes, element 2i low / 2i+1 high. ggml's: element j low / j+8 high.
      const uint8_t* source = codes + (b * kNvfp4Block + g * kGroup) / 2;
      uint8_t element[kGroup];
      for (int i = 0; i < kGroup / 2; ++i) {
        element[2 * i] = source[i] & 0xF;
        element[2 * i + 1] = source[i] >> 4;
      }
      uint8_t* target = block + 4 + g * (kGroup / 2);
      for (int j = 0; j < kGroup / 2; ++j) target[j] = static_cast<uint8_t>(element[j] | (element[j + 8] << 4));
    }
  }
}

void unpack_nvfp4_row(const uint8_t* src, int64_t cols, uint8_t* codes, uint8_t* scales) {
  NVFP4LM_ASSERT(cols % kNvfp4Block == 0, "unpack_nvfp4_row: {} columns", cols);
  for (int64_t b = 0; b < cols / kNvfp4Block; ++b) {
    const uint8_t* block = src + b * 36;
    for (int g = 0; g < kNvfp4Block / kGroup; ++g) {
      scales[b * 4 + g] = block[g];
      const uint8_t* source = block + 4 + g * (kGroup / 2);
      uint8_t element[kGroup];
      for (int j = 0; j < kGroup / 2; ++j) {
        element[j] = source[j] & 0xF;
        element[j + 8] = source[j] >> 4;
      }
      uint8_t* target = codes + (b * kNvfp4Block + g * kGroup) / 2;
      for (int i = 0; i < kGroup / 2; ++i) target[i] = static_cast<uint8_t>(element[2 * i] | (element[2 * i + 1] << 4));
    }
  }
}

}  // namespace nvfp4lm::gguf
