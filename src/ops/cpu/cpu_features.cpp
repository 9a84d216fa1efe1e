// See cpu_features.h. The only file that asks the CPU (GCC's and clang's __builtin_cpu_supports, which read CPUID
// once at start-up); clang has no names for the x86-64 levels, and its builds compile no level variants either.
#include "ops/cpu/cpu_features.h"

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "ops/cpu/x86/simd.h"

namespace nvfp4lm::cpu {
namespace {

constexpr IsaLevel kLevels[] = {IsaLevel::Scalar, IsaLevel::Avx2, IsaLevel::Avx512F, IsaLevel::Avx512All};

CpuFeatures probe() {
  CpuFeatures present;
#if NVFP4LM_X86_INTRINSICS
  const auto add = [&](bool has, CpuFeature feature) {
    if (has) present = present | CpuFeatures{feature};
  };
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
  return present;
}

IsaLevel parse_limit() {
  const char* text = std::getenv("NVFP4LM_CPU_ISA");
  if (text == nullptr || *text == '\0') return IsaLevel::Avx512All;
  for (IsaLevel level : kLevels)
    if (std::string(text) == isa_level_name(level)) return level;
  NVFP4LM_FAIL("NVFP4LM_CPU_ISA='{}' is not a CPU kernel level: use scalar, avx2, avx512f or native (or unset it)",
               text);
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
    case IsaLevel::Avx512All:
      return "native";
  }
  return "?";
}

CpuFeatures isa_level_features(IsaLevel level) {
  using F = CpuFeature;
  const CpuFeatures avx2{F::Avx2, F::Fma, F::X86_64_V3};
  const CpuFeatures avx512f = avx2 | CpuFeatures{F::Avx512F, F::Avx512Bw, F::Avx512Vl, F::X86_64_V4};
  switch (level) {
    case IsaLevel::Scalar:
      return {};
    case IsaLevel::Avx2:
      return avx2;
    case IsaLevel::Avx512F:
      return avx512f;
    case IsaLevel::Avx512All:
      break;
  }
  return avx512f | CpuFeatures{F::Avx512Vnni, F::Avx512Vbmi, F::Avx512Bf16};
}

CpuFeatures cpu_features_usable() {
  static const CpuFeatures usable = cpu_features_present() & isa_level_features(cpu_isa_limit());
  return usable;
}

bool cpu_can_run(const CpuIsa& isa) { return cpu_features_present().contains(isa.needs); }
bool cpu_may_use(const CpuIsa& isa) { return cpu_features_usable().contains(isa.needs); }

}  // namespace nvfp4lm::cpu
