// Helpers for the NVFP4 tests: unpacked views of a quantized matrix and an independent, element-by-element
// statement of the quantization rule (ModelOpt's, see quant/nvfp4_block.h) written from the definition, so
// the library's loops, packing and threading are checked against straightforward code.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"
#include "quant/nvfp4.h"

namespace nvfp4lm::test {

// One code (0..15) per element, row-major [rows, cols].
inline std::vector<uint8_t> codes_of(const Nvfp4Tensor& q) {
  Tensor codes = q.codes.to(Device::cpu()).contiguous();
  const uint8_t* packed = static_cast<const uint8_t*>(codes.raw());
  std::vector<uint8_t> out(static_cast<size_t>(q.rows * q.cols));
  for (size_t i = 0; i < out.size(); ++i) out[i] = (i % 2 == 0) ? (packed[i / 2] & 0xF) : (packed[i / 2] >> 4);
  return out;
}

// One scale byte per 1x16 block, row-major [rows, cols/16].
inline std::vector<uint8_t> scales_of(const Nvfp4Tensor& q) {
  Tensor scales = q.block_scales.to(Device::cpu()).contiguous();
  const uint8_t* p = static_cast<const uint8_t*>(scales.raw());
  return std::vector<uint8_t>(p, p + scales.numel());
}

inline std::vector<uint8_t> bytes_of(const Tensor& t) {
  Tensor c = t.to(Device::cpu()).contiguous();
  const uint8_t* p = static_cast<const uint8_t*>(c.raw());
  return std::vector<uint8_t>(p, p + c.nbytes());
}

// Half the E2M1 grid step at magnitude y (in units of the block's scale): 0.25 below 2, 0.5 below 4, 1 above.
inline float e2m1_half_step(float y) {
  y = std::fabs(y);
  return y < 2.0f ? 0.25f : (y < 4.0f ? 0.5f : 1.0f);
}

struct ReferenceQuant {
  float tensor_scale = 1.0f;
  std::vector<uint8_t> scales;  // [rows, cols/16]
  std::vector<uint8_t> codes;   // [rows, cols], one code per element
  std::vector<float> values;    // decoded
};

// The rule, element by element: tensor scale 1/(1/(amax/2688)) (or fixed_tensor_scale when > 0: a calibrated
// input_scale), block scale e4m3(block_amax / (6 * ts)) with an all-zero block at 1.0 and a floor of 2^-9, saturating
// at 448, codes rne(x / (scale * ts)) saturating at ±6 (stochastic: counter (seed, index)).
inline ReferenceQuant reference_quantize(const std::vector<float>& x, int64_t rows, int64_t cols, bool tile,
                                         bool stochastic = false, uint64_t seed = 0, float fixed_tensor_scale = 0.0f) {
  ReferenceQuant ref;
  float amax = 0.0f;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  ref.tensor_scale = amax == 0.0f ? 1.0f : amax / 2688.0f;
  if (ref.tensor_scale == 0.0f) ref.tensor_scale = 1.0f;
  // The reciprocal round trip that keeps the scale through compressed-tensors' 1/x (none when 1/x overflows).
  else if (const float back = 1.0f / (1.0f / ref.tensor_scale); back > 0.0f)
    ref.tensor_scale = back;
  if (fixed_tensor_scale > 0.0f) ref.tensor_scale = fixed_tensor_scale;
  const int64_t col_blocks = cols / 16;
  ref.scales.resize(static_cast<size_t>(rows * col_blocks));
  ref.codes.resize(x.size());
  ref.values.resize(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < col_blocks; ++b) {
      const int64_t r0 = tile ? r / 16 * 16 : r, r1 = tile ? r0 + 16 : r + 1;
      float block_amax = 0.0f;
      for (int64_t rr = r0; rr < r1; ++rr)
        for (int64_t c = b * 16; c < b * 16 + 16; ++c)
          block_amax = std::max(block_amax, std::fabs(x[static_cast<size_t>(rr * cols + c)]));
      float scale = block_amax / (6.0f * ref.tensor_scale);
      if (scale == 0.0f) scale = 1.0f;
      scale = std::min(std::max(scale, 0.001953125f), 448.0f);
      const uint8_t byte = float_to_e4m3_rne(scale);
      ref.scales[static_cast<size_t>(r * col_blocks + b)] = byte;
      const float denominator = e4m3_to_float(byte) * ref.tensor_scale;
      for (int64_t c = b * 16; c < b * 16 + 16; ++c) {
        const size_t i = static_cast<size_t>(r * cols + c);
        uint8_t code = 0;
        if (denominator != 0.0f) {
          const float y = std::clamp(x[i] / denominator, -6.0f, 6.0f);
          code = stochastic ? float_to_e2m1_stochastic(y, counter_uniform(seed, i)) : float_to_e2m1_rne(y);
        }
        ref.codes[i] = code;
        ref.values[i] = e2m1_to_float(code) * denominator;
      }
    }
  }
  return ref;
}

}  // namespace nvfp4lm::test
