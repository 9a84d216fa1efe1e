// NVFP4 weights (DESIGN.md §3): value = e2m1_code * e4m3_block_scale * tensor_scale.
//  - codes: E2M1 {0, .5, 1, 1.5, 2, 3, 4, 6} with a sign bit, two per byte, element 2i in the low nibble;
//    stored as an E2M1x2 tensor [rows, cols/2].
//  - block scales: one E4M3 byte per 16 consecutive elements of a row, [rows, cols/16]. In 2D mode
//    (16x16 tiles) all 16 rows of a tile share a scale, stored replicated so the layout is the same.
//  - tensor scale: one fp32 multiplier, amax / (6 * 448) (through 1 / (1 / s), nvfp4_block.h), so block scales use
//    the E4M3 range. Files of the seed `.dat` format carry none: they read with tensor_scale = 1.
// cols must be a multiple of 16 (and rows a multiple of 16 in 2D mode). The exact per-block rule (NVIDIA
// ModelOpt's, shared by the CPU code and its CUDA twin) is in quant/nvfp4_block.h; value =
// e2m1_to_float(code) * nvfp4_dequant_scale(scale_byte, tensor_scale) everywhere (quant/e4m3.h).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace nvfp4lm {

inline constexpr int kNvfp4BlockSize = 16;
inline constexpr float kE2M1Max = 6.0f;
inline constexpr float kE4M3Max = 448.0f;

enum class Nvfp4Block { Row1x16, Tile16x16 };
enum class Rounding { NearestEven, Stochastic };

struct Nvfp4QuantOptions {
  Nvfp4Block block = Nvfp4Block::Row1x16;
  Rounding rounding = Rounding::NearestEven;
  uint64_t seed = 0;  // stochastic rounding: element (r, c) uses counter_uniform(seed, r * cols + c)
  // > 0: quantize with this tensor scale instead of amax / (6 * 448) — for groups that share one scale
  // (fused q/k/v and gate/up in ModelOpt exports) and for `.dat` files (scale 1). Must be finite.
  float tensor_scale = 0.0f;
};

// A quantized [rows, cols] matrix. codes and block_scales live on the same device.
// How codes and block scales are stored. Rows everywhere, except in a CPU inference model that runs the integer
// decode kernel on the interleaved layout (ops/nvfp4_linear.h, interleave_for_cpu_int8): only the CPU NVFP4 linear
// reads that; everything else requires Rows.
enum class Nvfp4Layout {
  Rows,          // codes [rows, cols/2] and block_scales [rows, cols/16], row-major
  Interleaved16  // codes: U8 in ops/cpu/nvfp4_interleaved.h's layout (codes and scales of 16 rows together);
                 // block_scales undefined
};

struct Nvfp4Tensor {
  Tensor codes;         // E2M1x2 [rows, cols/2]
  Tensor block_scales;  // E4M3   [rows, cols/16]
  float tensor_scale = 1.0f;
  int64_t rows = 0;
  int64_t cols = 0;
  Nvfp4Layout layout = Nvfp4Layout::Rows;

  bool defined() const { return codes.defined(); }
  Device device() const { return codes.device(); }
  size_t nbytes() const {
    return codes.nbytes() + (block_scales.defined() ? block_scales.nbytes() : 0) + sizeof(float);
  }
};

// Quantizes a [rows, cols] F32 or BF16 matrix (CPU or CUDA). Non-finite input is an Error naming `what`.
Nvfp4Tensor quantize_nvfp4(const Tensor& weight, const Nvfp4QuantOptions& options = {}, const char* what = "weight");
// Dequantizes into `out` ([rows, cols], F32 or BF16, same device as q; allocated by the caller).
void dequantize_nvfp4(const Nvfp4Tensor& q, Tensor& out);
Tensor dequantize_nvfp4(const Nvfp4Tensor& q, DType dtype);

// Quantize then dequantize in one pass, without materializing codes: out equals
// dequantize_nvfp4(quantize_nvfp4(weight, options), out.dtype()) bit for bit. out: [rows, cols] F32 or BF16,
// contiguous, on weight's device, allocated by the caller. Used once per optimizer step in QAT.
void fake_quantize_nvfp4(const Tensor& weight, Tensor& out, const Nvfp4QuantOptions& options = {},
                         const char* what = "weight");

// The activations of a W4A4 linear at inference (a calibrated checkpoint's linears, model/qwen3_inference.cpp): the
// rows of x [rows, cols] (F32 or BF16, contiguous) quantized in 1x16 blocks, round to nearest even, with the fixed
// tensor scale `tensor_scale` (the checkpoint's input_scale: > 0, finite). Values past the calibrated range saturate
// (block scale 448, code 6), as vLLM's activation quantizer's satfinite conversions do. Nothing else is read: no amax
// pass, hence no finite check (non-finite input gives meaningless codes, as it gives NaN logits in W4A16) and on
// CUDA no synchronization, so a captured decode graph can hold it. The same bytes as quantize_nvfp4 with
// options.tensor_scale = tensor_scale for finite input. Into out's codes [rows, cols/2] and block scales
// [rows, cols/16], contiguous, allocated by the caller on x's device; sets out.rows / cols / tensor_scale.
void quantize_nvfp4_static(const Tensor& x, float tensor_scale, Nvfp4Tensor& out);

// Whether a tensor of `shape` can be NVFP4 with these blocks: [rows, cols] with cols a multiple of 16 (rows too for
// 16x16 tiles). Callers that plan NVFP4 weights (export, quantize, QAT) check it and name the weight in their error.
bool nvfp4_shape_fits(const Shape& shape, Nvfp4Block block);

// The tensor scale quantize_nvfp4 uses: amax / (6 * 448) passed through 1 / (1 / s) so that compressed-tensors'
// reciprocal stores it exactly, or 1 when amax is 0 (or so small that the quotient underflows). The block/element rules
// are in quant/nvfp4_block.h.
float nvfp4_tensor_scale(float amax);

// CPU helpers for tools and tests: packed E2M1x2 (or U8) [rows, cols/2] <-> U8 [rows, cols] holding one
// code (0..15) per byte.
Tensor unpack_e2m1_codes(const Tensor& packed);
Tensor pack_e2m1_codes(const Tensor& codes);

// Checks shapes/dtypes of a quantized weight read from a file (`what` names file and tensor): codes E2M1x2
// or U8 [rows, cols/2], block scales E4M3 [rows, cols/16], both contiguous on one device, cols a multiple
// of 16, a finite positive tensor scale; on the CPU also that no block scale is NaN (0x7F / 0xFF).
void validate_nvfp4(const Nvfp4Tensor& q, const std::string& what);

}  // namespace nvfp4lm
