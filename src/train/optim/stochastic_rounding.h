// Stochastic rounding of fp32 values to bf16, for bf16 master weights.
//
// Round-to-nearest loses every update smaller than half a bf16 ulp (lr * update / |w| < 2^-9), so a bf16
// master stops learning once the learning rate decays. Rounding up with probability equal to the discarded
// fraction makes the rounded value unbiased: E[round(x)] = x, and small updates survive on average.
//
// Randomness is counter-based (core/rng.h counter_uniform): element i of a parameter draws
// counter_uniform(master_rounding_seed(optimizer seed, step, parameter key), i), so the result does not depend
// on threads or kernel launch shapes, and a CUDA kernel that uses these same functions writes the same bits.
#pragma once

#include <cstdint>

#include "core/numeric.h"
#include "core/rng.h"

namespace nvfp4lm {

// One seed per (optimizer seed, step, parameter): `parameter_key` is a hash of the parameter's name
// (see Optimizer), so it does not change when the order of the parameter list does.
NVFP4LM_HD uint64_t master_rounding_seed(uint64_t optimizer_seed, uint64_t step, uint64_t parameter_key) {
  return mix64(mix64(optimizer_seed ^ mix64(step)) ^ parameter_key);
}

// A second, independent seed from one seed (e.g. for 8-bit optimizer moments next to the master weight).
NVFP4LM_HD uint64_t derive_rounding_seed(uint64_t seed, uint64_t stream) { return mix64(seed ^ mix64(~stream)); }

// fp32 -> bf16, rounding up in magnitude with probability (discarded low 16 bits) / 2^16.
// `uniform` is in [0, 1) with 24 bits (counter_uniform); its top 16 bits are the noise added below the cut.
// NaN and infinity are passed to the round-to-nearest conversion (which keeps them).
NVFP4LM_HD uint16_t float_to_bf16_stochastic(float value, float uniform) {
  const uint32_t bits = float_bits(value);
  if ((bits & 0x7f800000u) == 0x7f800000u) return float_to_bf16(value);
  const uint32_t noise = static_cast<uint32_t>(uniform * 65536.0f);  // exact: uniform = k / 2^24
  // Sign-magnitude: adding to the low bits grows the magnitude; a carry moves to the next bf16 value
  // (across a binade, or to infinity past the largest finite value, as the exact value would round).
  return static_cast<uint16_t>((bits + noise) >> 16);
}

}  // namespace nvfp4lm
