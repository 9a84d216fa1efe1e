// Row codecs for the ggml tensor types of io/gguf_format.h: one row of fp32 values <-> its bytes in a GGUF file,
// and the bit-exact repacking of an NVFP4 row between nvfp4lm's layout (codes two a byte with element 2i in the
// low nibble, one E4M3 scale per 16) and ggml's block_nvfp4.
//
// Encoders follow ggml's reference rules in their effect (written here from the block layouts, not copied):
//   Q8_0: d = amax / 127, q = round-half-away(x / d).
//   Q4_0: d = -m / 8 where m is the first element of largest magnitude (sign kept, so that one maps to code 0),
//         q = min(15, floor(x / d + 8.5)).
//   Q6_K: per 16 elements s = amax / 31 (signed codes -32..31), d = max s / 127 (f16), int8 scale = round(s / d),
//         q = clamp(round(x / (d * scale)), -32, 31). llama-quantize searches scales to minimise the error; this
//         simpler choice decodes with the same formula, only its error is a little larger.
//   F16 / BF16: round to nearest even.
// Scales are rounded to f16 as stored; Q4_0 / Q8_0 compute their codes with the unrounded scale, as ggml does.
#pragma once

#include <cstdint>

#include "io/gguf_format.h"

namespace nvfp4lm::gguf {

// `count` values (a multiple of the block size) into row_bytes(type, count) bytes at dst. NVFP4 is not encoded
// from floats here (nvfp4lm's quantizer makes NVFP4 weights; repack_nvfp4_row stores them).
void encode_row(GgmlType type, const float* values, int64_t count, uint8_t* dst);

// The values a row decodes to, as llama.cpp decodes them (NVFP4: e2m1 * e4m3 scale, without the tensor scale).
void decode_row(GgmlType type, const uint8_t* src, int64_t count, float* values);

// One NVFP4 row of `cols` elements (a multiple of 64) from nvfp4lm's layout (codes [cols/2], scales [cols/16])
// into ggml blocks (row_bytes(NVFP4, cols) bytes): the same codes and scale bytes, regrouped. Error (naming
// `what`) for a scale with its sign bit set, which UE4M3 cannot hold.
void repack_nvfp4_row(const uint8_t* codes, const uint8_t* scales, int64_t cols, uint8_t* dst, const char* what);
// The inverse: ggml blocks -> nvfp4lm's codes and scale bytes.
void unpack_nvfp4_row(const uint8_t* src, int64_t cols, uint8_t* codes, uint8_t* scales);

}  // namespace nvfp4lm::gguf
