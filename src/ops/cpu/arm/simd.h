// NEON building blocks of the AArch64 kernel variants (this folder), beside the portable reference in ops/cpu/.
//
// NVFP4LM_ARM_INTRINSICS: 1 where the AArch64 variants are built (GCC for AArch64; clang spells the target
// attributes differently and is not a supported compiler there yet). Each variant's entry function carries the
// ISA it needs as a target attribute (NVFP4LM_ARM_DOTPROD, ...), never the whole file, so no code outside those
// functions (templates of the standard library, inline helpers) is compiled for an instruction the CPU may lack; the
// family table (ops/cpu/kernel_family.h) runs a variant only where cpu_features.h found its ISA. The entry functions
// are also `flatten`: everything they call (the shared bodies below, templated on a Dot policy) is inlined into them
// and compiled for their ISA, which is how one body serves the NEON and the SDOT variants.
#pragma once

#if defined(__aarch64__) && defined(__GNUC__) && !defined(__clang__)
#define NVFP4LM_ARM_INTRINSICS 1
#include <arm_neon.h>

#include <cstdint>

// GCC's arm_neon.h defines the SDOT / SMMLA / BFMMLA intrinsics for "arch=armv8.2-a+<extension>"; a function that
// calls them must name at least that.
#define NVFP4LM_ARM_NEON __attribute__((flatten))
#define NVFP4LM_ARM_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod"), flatten))
#define NVFP4LM_ARM_I8MM __attribute__((target("arch=armv8.2-a+dotprod+i8mm"), flatten))
#define NVFP4LM_ARM_BF16 __attribute__((target("arch=armv8.2-a+bf16"), flatten))

namespace nvfp4lm::cpu::arm {

// Sums of 4 consecutive int8 products per int32 lane: lane i += Σ_{k<4} a[4i+k]·b[4i+k] (SDOT's definition), and the
// same with b's lane `Lane` (4 bytes) broadcast (SDOT by element). Exact in integers either way, so the two policies
// give the same sums: NeonDot with a widening multiply and two pairwise adds (ARMv8.0), SdotDot in one instruction.
struct NeonDot {
  static inline int32x4_t dot(int32x4_t acc, int8x16_t a, int8x16_t b) {
    const int16x8_t low = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    const int16x8_t high = vmull_high_s8(a, b);
    return vaddq_s32(acc, vpaddq_s32(vpaddlq_s16(low), vpaddlq_s16(high)));
  }
  template <int Lane>
  static inline int32x4_t dot_lane(int32x4_t acc, int8x16_t a, int8x16_t b) {
    return dot(acc, a, vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(b), Lane)));
  }
};
struct SdotDot {
  __attribute__((target("arch=armv8.2-a+dotprod"))) static inline int32x4_t dot(int32x4_t acc, int8x16_t a,
                                                                                int8x16_t b) {
    return vdotq_s32(acc, a, b);
  }
  template <int Lane>
  __attribute__((target("arch=armv8.2-a+dotprod"))) static inline int32x4_t dot_lane(int32x4_t acc, int8x16_t a,
                                                                                     int8x16_t b) {
    return vdotq_laneq_s32(acc, a, b, Lane);
  }
};

// 8 E4M3 bytes as fp32 values e4m3(byte) / 256, exactly (subnormals too): the byte shifted left by 7 is an fp16
// with the E4M3 exponent and mantissa in place and the sign on bit 14; adding bit 14 to itself moves the sign to bit
// 15. An E4M3 is an fp16 with one exponent bit fewer, so the fp16 is the byte's value times 2^(7 - 15). (The NaN
// bytes 0x7F / 0xFF decode as 1.875 / -1.875: no NVFP4 scale holds them; the x86 kernels decode the same way.)
inline void e4m3_over_256(uint8x8_t bytes, float32x4_t& low, float32x4_t& high) {
  const uint16x8_t shifted = vshlq_n_u16(vmovl_u8(bytes), 7);
  const uint16x8_t half = vaddq_u16(shifted, vandq_u16(shifted, vdupq_n_u16(0x4000)));
  low = vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(half)));
  high = vcvt_f32_f16(vreinterpret_f16_u16(vget_high_u16(half)));
}

// The 16 lanes of acc added one by one, left to right, from 0: how the portable row kernels add up their 16 block
// accumulators, so a NEON variant's result is theirs bit for bit.
inline float sum_lanes_in_order(const float32x4_t (&acc)[4]) {
  float lanes[16];
  for (int v = 0; v < 4; ++v) vst1q_f32(lanes + 4 * v, acc[v]);
  float sum = 0.f;
  for (float lane : lanes) sum += lane;
  return sum;
}

// The 16 NVFP4 codes (one per nibble value) as signed int8 weights 2·e2m1(code) in [-12, 12]: a TBL looks them up.
// Signed, unlike the x86 kernels' 2·e2m1 + 12 (vpdpbusd multiplies an unsigned operand; SDOT multiplies two signed
// ones), so no bias term is needed: the integer sums are the same.
int8x16_t doubled_e2m1_table();

}  // namespace nvfp4lm::cpu::arm
#else
#define NVFP4LM_ARM_INTRINSICS 0
#endif
