// Dot products of a few activation rows with packed NVFP4 weight rows, without materialising the weight: the
// inner loop of a CPU decode step (ops/cpu/nvfp4_linear.cpp's fused path). The weight is read once, 4.5 bits an
// element, so a decode step is bound by memory bandwidth, as on the GPU.
//
// Per 16-element block the E2M1 codes become floats with one table permute (AVX-512: the 16 signed values; AVX2:
// the 8 magnitudes plus the sign bit), are multiplied by the block's multiplier nvfp4_dequant_scale(...) (the same
// fp32 product every dequantization makes, quant/e4m3.h) and fused-multiply-added into per-lane sums. Results
// equal x · deq(w)ᵀ up to fp32 summation order; the order is fixed per ISA, so runs repeat bit for bit on one
// machine. The variant is picked once (nvfp4_dot_family().chosen(), ops/cpu/kernel_family.h); tests run every
// variant the CPU has. The x86 variants live in ops/cpu/x86/nvfp4_dot.cpp.
#pragma once

#include <array>
#include <cstdint>

#include "ops/cpu/dot_rows.h"
#include "ops/cpu/kernel_family.h"

namespace nvfp4lm::cpu {

// Elements that share one E4M3 block scale (quant/nvfp4.h kNvfp4BlockSize), as the CPU kernels name it.
inline constexpr int kNvfp4Block = 16;

struct Nvfp4Rows {
  const uint8_t* codes;   // [rows, cols / 2], two E2M1 codes a byte, element 2i in the low nibble
  const uint8_t* scales;  // [rows, cols / 16] E4M3 block scales
  int64_t cols;           // a multiple of 16
  float tensor_scale;
};

using Nvfp4DotFn = void (*)(const Nvfp4Rows&, int64_t, int64_t, const float* const*, float* const*);
using Nvfp4DotFamily = KernelFamily<RowKernels<Nvfp4DotFn>>;
const Nvfp4DotFamily& nvfp4_dot_family();  // avx512f, avx2+fma, scalar

// What every variant's decode uses: the block multiplier of each scale byte for this tensor scale
// (nvfp4_dequant_scale itself, tabulated), and the 16 E2M1 values.
std::array<float, 256> nvfp4_multiplier_table(float tensor_scale);
std::array<float, 16> e2m1_value_table();

// y_rows[r][o] = Σ_k x_rows[r][k] · deq(w)[o][k] for weight rows o in [first, last) and r < n (1 <= n <= 8).
// x rows hold `cols` floats; y rows are written at index o.
void nvfp4_dot_rows(const Nvfp4DotFamily::Variant& variant, const Nvfp4Rows& w, int64_t first, int64_t last,
                    const float* const* x_rows, float* const* y_rows, int n);

}  // namespace nvfp4lm::cpu
