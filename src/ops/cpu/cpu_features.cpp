// See cpu_features.h. The only file that asks the CPU: GCC's and clang's __builtin_cpu_supports on x86-64 (they read
// CPUID once at start-up; clang has no names for the x86-64 levels, and its builds compile no level variants
// either), getauxval on AArch64 Linux (the kernel's view of ID_AA64ISAR*, so a feature the kernel does not enable is
// not reported either).
#include "ops/cpu/cpu_features.h"

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "ops/cpu/arm/simd.h"
#include "ops/cpu/x86/simd.h"

#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
// The bits of Linux's arch/arm64 uapi hwcap.h, for C libraries whose headers predate them.
#ifndef HWCAP2_SVE2
#define HWCAP2_SVE2 (1 << 1)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1 << 13)
#endif
#ifndef HWCAP2_BF16
#define HWCAP2_BF16 (1 << 14)
#endif
#endif

namespace nvfp4lm::cpu {
namespace {

#if defined(__aarch64__)
constexpr IsaLevel kLevels[] = {IsaLevel::Scalar, IsaLevel::Neon, IsaLevel::DotProd, IsaLevel::Native};
#elif defined(__x86_64__)
constexpr IsaLevel kLevels[] = {IsaLevel::Scalar, IsaLevel::Avx2, IsaLevel::Avx512F, IsaLevel::Native};
#else
constexpr IsaLevel kLevels[] = {IsaLevel::Scalar, IsaLevel::Native};
#endif

CpuFeatures probe() {
  CpuFeatures present;
  [[maybe_unused]] const auto add = [&](bool has, CpuFeature feature) {
    if (has) present = present | CpuFeatures{feature};
  };
#if NVFP4LM_X86_INTRINSICS
  add(__builtin_cpu_supports("avx2"), CpuFeature::Avx2);
  add(__builtin_cpu_supports("fma"), CpuFeature::Fma);
  add(__builtin_cpu_supports("avx512f"), CpuFeature::Avx512F);
  add(__builtin_cpu_supports("avx512bw"), CpuFeature::Avx512Bw);
  add(__builtin_cpu_supports("avx512vl"), CpuFeature::Avx512Vl);
  add(__builtin_cpu_supports("avx512vnni"), CpuFeature::Avx512Vnni);
  add(__builtin_cpu_supports("avx512vbmi"), CpuFeature::Avx512Vbmi);
  add(__builtin_cpu_supports("avx512bf16"), CpuFeature::Avx512Bf16);
#if NVFP4LM_X86_LEVELS
  add(__builtin_cpu_supports("x86-64-v3"), CpuFeature::X86_64_V3);
  add(__builtin_cpu_supports("x86-64-v4"), CpuFeature::X86_64_V4);
#endif
#endif
#if defined(__aarch64__) && defined(__linux__)
  const unsigned long hwcap = getauxval(AT_HWCAP), hwcap2 = getauxval(AT_HWCAP2);
  add((hwcap & HWCAP_ASIMD) != 0, CpuFeature::Asimd);
  add((hwcap & HWCAP_ASIMDDP) != 0, CpuFeature::AsimdDp);
  add((hwcap & HWCAP_SVE) != 0, CpuFeature::Sve);
  add((hwcap2 & HWCAP2_SVE2) != 0, CpuFeature::Sve2);
  add((hwcap2 & HWCAP2_I8MM) != 0, CpuFeature::I8mm);
  add((hwcap2 & HWCAP2_BF16) != 0, CpuFeature::Bf16);
#endif
  return present;
}

std::string level_names() {
  std::string text;
  for (size_t i = 0; i < std::size(kLevels); ++i)
    text += std::string(i == 0 ? "" : i + 1 == std::size(kLevels) ? " or " : ", ") + isa_level_name(kLevels[i]);
  return text;
}

IsaLevel parse_limit() {
  const char* text = std::getenv("NVFP4LM_CPU_ISA");
  if (text == nullptr || *text == '\0') return IsaLevel::Native;
  for (IsaLevel level : kLevels)
    if (std::string(text) == isa_level_name(level)) return level;
  NVFP4LM_FAIL("NVFP4LM_CPU_ISA='{}' is not a CPU kernel level of this {} build: use {} (or unset it)", text,
#if defined(__aarch64__)
               "AArch64",
#elif defined(__x86_64__)
               "x86-64",
#else
               "portable",
#endif
               level_names());
}

}  // namespace

const char* cpu_feature_name(CpuFeature feature) {
  switch (feature) {
    case CpuFeature::Avx2:
      return "avx2";
    case CpuFeature::Fma:
      return "fma";
    case CpuFeature::Avx512F:
      return "avx512f";
    case CpuFeature::Avx512Bw:
      return "avx512bw";
    case CpuFeature::Avx512Vl:
      return "avx512vl";
    case CpuFeature::Avx512Vnni:
      return "avx512vnni";
    case CpuFeature::Avx512Vbmi:
      return "avx512vbmi";
    case CpuFeature::Avx512Bf16:
      return "avx512bf16";
    case CpuFeature::X86_64_V3:
      return "x86-64-v3";
    case CpuFeature::X86_64_V4:
      return "x86-64-v4";
    case CpuFeature::Asimd:
      return "asimd";
    case CpuFeature::AsimdDp:
      return "asimddp";
    case CpuFeature::I8mm:
      return "i8mm";
    case CpuFeature::Bf16:
      return "bf16";
    case CpuFeature::Sve:
      return "sve";
    case CpuFeature::Sve2:
      return "sve2";
  }
  return "?";
}

std::string CpuFeatures::names() const {
  std::string text;
  for (int i = 0; i < kCpuFeatureCount; ++i) {
    const auto feature = static_cast<CpuFeature>(i);
    if (!has(feature)) continue;
    if (!text.empty()) text += ' ';
    text += cpu_feature_name(feature);
  }
  return text;
}

CpuFeatures cpu_features_present() {
  static const CpuFeatures present = probe();
  return present;
}

std::span<const IsaLevel> isa_levels() { return kLevels; }

IsaLevel cpu_isa_limit() {
  static const IsaLevel limit = parse_limit();
  return limit;
}

const char* isa_level_name(IsaLevel level) {
  switch (level) {
    case IsaLevel::Scalar:
      return "scalar";
    case IsaLevel::Avx2:
      return "avx2";
    case IsaLevel::Avx512F:
      return "avx512f";
    case IsaLevel::Neon:
      return "neon";
    case IsaLevel::DotProd:
      return "dotprod";
    case IsaLevel::Native:
      return "native";
  }
  return "?";
}

CpuFeatures isa_level_features(IsaLevel level) {
  using F = CpuFeature;
  const CpuFeatures avx2{F::Avx2, F::Fma, F::X86_64_V3};
  const CpuFeatures avx512f = avx2 | CpuFeatures{F::Avx512F, F::Avx512Bw, F::Avx512Vl, F::X86_64_V4};
  const CpuFeatures neon{F::Asimd};
  const CpuFeatures dotprod = neon | CpuFeatures{F::AsimdDp};
  switch (level) {
    case IsaLevel::Scalar:
      return {};
    case IsaLevel::Avx2:
      return avx2;
    case IsaLevel::Avx512F:
      return avx512f;
    case IsaLevel::Neon:
      return neon;
    case IsaLevel::DotProd:
      return dotprod;
    case IsaLevel::Native:
      break;
  }
  return avx512f | dotprod |
         CpuFeatures{F::Avx512Vnni, F::Avx512Vbmi, F::Avx512Bf16, F::I8mm, F::Bf16, F::Sve, F::Sve2};
}

CpuFeatures cpu_features_usable() {
  static const CpuFeatures usable = cpu_features_present() & isa_level_features(cpu_isa_limit());
  return usable;
}

bool cpu_can_run(const CpuIsa& isa) { return cpu_features_present().contains(isa.needs); }
bool cpu_may_use(const CpuIsa& isa) { return cpu_features_usable().contains(isa.needs); }

}  // namespace nvfp4lm::cpu
