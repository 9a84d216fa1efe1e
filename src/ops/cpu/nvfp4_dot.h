// Dot products of a few activation rows with packed NVFP4 weight rows, without materialising the weight: the
// inner loop of a CPU decode step (ops/cpu/nvfp4_linear.cpp's fused path). The weight is read once, 4.5 bits an
// element, so a decode step is bound by memory bandwidth, as on the GPU.
//
// Per 16-element block the E2M1 codes become floats with one table permute (AVX-512: the 16 signed values; AVX2:
// the 8 magnitudes plus the sign bit), are multiplied by the block's multiplier nvfp4_dequant_scale(...) (the same
// fp32 product every dequantization makes, quant/e4m3.h) and fused-multiply-added into per-lane sums. Results
// equal x · deq(w)ᵀ up to fp32 summation order; the order is fixed per ISA, so runs repeat bit for bit on one
// machine. The ISA is picked once from the CPU (best_nvfp4_dot_isa); tests run every ISA the CPU has.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace nvfp4lm::cpu {

// Activation rows one call of nvfp4_dot_rows / dense_dot_rows takes (their accumulators live in registers).
inline constexpr int kDotMaxRows = 8;

enum class DotIsa { Scalar, Avx2, Avx512 };

const char* dot_isa_name(DotIsa isa);  // "scalar", "avx2+fma", "avx512f"
bool dot_isa_supported(DotIsa isa);    // this CPU can run it (and this build has it)
DotIsa best_nvfp4_dot_isa();           // the widest supported one, probed once
std::vector<DotIsa> supported_dot_isas();
// The ISAs, narrowest first, for which `supported` holds (a kernel family's supported_*_isas()).
std::vector<DotIsa> dot_isas_where(bool (*supported)(DotIsa));

struct Nvfp4Rows {
  const uint8_t* codes;   // [rows, cols / 2], two E2M1 codes a byte, element 2i in the low nibble
  const uint8_t* scales;  // [rows, cols / 16] E4M3 block scales
  int64_t cols;           // a multiple of 16
  float tensor_scale;
};

// Kernels<n>::scalar, ::avx2 or ::avx512 (as `isa` says) for a run-time row count n in [1, kDotMaxRows]: the kernels
// take n as a template parameter so their accumulators live in registers. A build without the x86 variants points
// avx2 / avx512 at the scalar kernel (dot_isa_supported never offers them there).
template <typename Fn, template <int> class Kernels>
Fn pick_dot_kernel(DotIsa isa, int n) {
  Fn fn = nullptr;
  auto pick = [&]<int... Ns>(std::integer_sequence<int, Ns...>) {
    ((n == Ns + 1 ? (fn = isa == DotIsa::Avx512 ? Kernels<Ns + 1>::avx512
                          : isa == DotIsa::Avx2 ? Kernels<Ns + 1>::avx2
                                                : Kernels<Ns + 1>::scalar,
                     0)
                  : 0),
     ...);
  };
  pick(std::make_integer_sequence<int, kDotMaxRows>{});
  return fn;
}

// y_rows[r][o] = Σ_k x_rows[r][k] · deq(w)[o][k] for weight rows o in [first, last) and r < n (1 <= n <= 8).
// x rows hold `cols` floats; y rows are written at index o.
void nvfp4_dot_rows(DotIsa isa, const Nvfp4Rows& w, int64_t first, int64_t last, const float* const* x_rows,
                    float* const* y_rows, int n);

}  // namespace nvfp4lm::cpu
