// Portable kernels compiled once more per x86-64 level, so the portable build still uses the CPU's vector units
// (attention, SwiGLU, cross-entropy): kernel_at<kernel, level>() is `kernel` compiled for x86-64-v4 (AVX-512) or
// x86-64-v3 (AVX2 + FMA) with the kernel's body inlined (it must be [[gnu::always_inline]]), as GCC's target_clones
// would, or the kernel as written (the build's baseline). level_variants() lists them as a family's variants
// (ops/cpu/kernel_family.h), so NVFP4LM_CPU_ISA caps them like every other kernel. Use it on a coarse function (a
// whole task's loop nest): each call goes through a pointer. The level changes fp32 summation order between variants,
// not between runs.
#pragma once

#include <vector>

#include "ops/cpu/cpu_features.h"
#include "ops/cpu/kernel_family.h"
#include "ops/cpu/x86/simd.h"

namespace nvfp4lm::cpu {

// Fastest first; Portable is the kernel as written.
enum class KernelLevel { X86_64V4, X86_64V3, Portable };

#if NVFP4LM_X86_LEVELS
template <auto kernel>
struct X86Levels;

template <typename Result, typename... Args, Result (*kernel)(Args...)>
struct X86Levels<kernel> {
  __attribute__((target("arch=x86-64-v4"))) static Result v4(Args... args) { return kernel(args...); }
  __attribute__((target("arch=x86-64-v3"))) static Result v3(Args... args) { return kernel(args...); }
};
#endif

// `kernel` compiled for `level` (a pointer of kernel's type).
template <auto kernel, KernelLevel level>
constexpr auto kernel_at() {
  if constexpr (level == KernelLevel::Portable) {
    return kernel;
  } else {
#if NVFP4LM_X86_LEVELS
    if constexpr (level == KernelLevel::X86_64V4)
      return &X86Levels<kernel>::v4;
    else
      return &X86Levels<kernel>::v3;
#endif
  }
}

// A family's variants, one per level this build compiles: make.template operator()<level>() gives that level's
// kernels, e.g. []<KernelLevel L>() { return SwigluKernels{kernel_at<swiglu_row, L>(), ...}; }.
template <typename Kernels, typename Make>
std::vector<KernelVariant<Kernels>> level_variants(Make make) {
  std::vector<KernelVariant<Kernels>> variants;  // fastest first
#if NVFP4LM_X86_LEVELS
  variants.push_back({&kX86_64V4Isa, make.template operator()<KernelLevel::X86_64V4>()});
  variants.push_back({&kX86_64V3Isa, make.template operator()<KernelLevel::X86_64V3>()});
#endif
  variants.push_back({&kScalarIsa, make.template operator()<KernelLevel::Portable>()});
  return variants;
}

}  // namespace nvfp4lm::cpu
