// The NVFP4 quantization rule for one element and one block, shared by the CPU quantizer (nvfp4.cpp) and its
// CUDA twin (cuda/nvfp4.cu) so both produce the same bytes. It follows NVIDIA ModelOpt's NVFP4QTensor
// (get_weights_scaling_factor_2 / get_weights_scaling_factor / quantize), all in fp32:
//   tensor_scale = 1 / (1 / (amax / (6 * 448)))          (1 when amax is 0; see nvfp4_tensor_scale_of)
//   block scale  = e4m3_rne(block_amax / (6 * tensor_scale)), where a block amax of 0 uses scale 1.0 and a
//                  scale below 2^-9 (the smallest E4M3 subnormal) is raised to 2^-9, as ModelOpt does, so a
//                  tiny but non-zero block never gets a zero scale
//   denominator  = nvfp4_dequant_scale(scale byte, tensor_scale)   (the same number dequantization uses)
//   code         = e2m1_rne(x / denominator)   or e2m1_stochastic(x / denominator, u)
// A zero denominator (only possible when tensor_scale * scale underflows fp32) gives code 0 for the block.
// Differences from ModelOpt, on values only: a value that rounds to zero always gets code 0 (ModelOpt
// writes 8, i.e. -0, for small negative values); both decode to zero.
#pragma once

#include <cstdint>

#include "core/numeric.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"

namespace nvfp4lm {

// amax / (6 * 448), passed through 1 / (1 / s) in fp32; 1 when amax is 0 (an all-zero matrix) or so small that the
// quotient underflows to 0. The round trip leaves s as it is unless no float32's reciprocal rounds to s (17 % of
// float32 values; tests/quant/test_nvfp4.cpp counts them), and then moves it one ulp to a float that one does. Why:
// compressed-tensors stores the reciprocal (weight_global_scale = 1 / weight_scale_2, its ModelOpt converter
// modelopt_nvfp4.py:55-60) and vLLM multiplies by 1 / weight_global_scale, so only such a scale reads back as itself
// and a model stored in either NVFP4 format computes the same function. The move is 6e-8 of the scale (ModelOpt
// computes amax / (6 * 448) alone).
NVFP4LM_HD float nvfp4_tensor_scale_of(float amax) {
  const float tensor_scale = amax / (6.0f * 448.0f);
  if (!(tensor_scale > 0.0f)) return 1.0f;
  const float round_trip = 1.0f / (1.0f / tensor_scale);  // no -ffast-math anywhere: the compiler keeps both divisions
  return round_trip > 0.0f ? round_trip : tensor_scale;   // 0 when 1 / s overflowed (s far below FLT_MIN)
}

// The E4M3 scale byte of a block (1x16 or 16x16) whose largest magnitude is block_amax.
NVFP4LM_HD uint8_t nvfp4_block_scale_byte(float block_amax, float tensor_scale) {
  float scale = block_amax / (6.0f * tensor_scale);
  if (scale == 0.0f) scale = 1.0f;                 // all-zero block
  if (scale < 0.001953125f) scale = 0.001953125f;  // 2^-9: never round a non-zero block's scale to zero
  return float_to_e4m3_rne(scale);
}

NVFP4LM_HD uint8_t nvfp4_encode_rne(float x, float denominator) {
  return denominator == 0.0f ? uint8_t{0} : float_to_e2m1_rne(x / denominator);
}

// u: counter_uniform(seed, row * cols + col).
NVFP4LM_HD uint8_t nvfp4_encode_stochastic(float x, float denominator, float u) {
  return denominator == 0.0f ? uint8_t{0} : float_to_e2m1_stochastic(x / denominator, u);
}

// The value of one code: the definition every dequantization uses (denominator = nvfp4_dequant_scale()).
NVFP4LM_HD float nvfp4_decode(uint8_t code, float denominator) { return e2m1_to_float(code) * denominator; }

}  // namespace nvfp4lm
