// See isa_limit.h.
#include "ops/cpu/isa_limit.h"

#include <cstdlib>
#include <string>

#include "core/error.h"

namespace nvfp4lm::cpu {
namespace {

constexpr IsaLevel kLevels[] = {IsaLevel::Scalar, IsaLevel::Avx2, IsaLevel::Avx512F, IsaLevel::Avx512All};

IsaLevel parse_limit() {
  const char* text = std::getenv("NVFP4LM_CPU_ISA");
  if (text == nullptr || *text == '\0') return IsaLevel::Avx512All;
  for (IsaLevel level : kLevels)
    if (std::string(text) == isa_level_name(level)) return level;
  NVFP4LM_FAIL("NVFP4LM_CPU_ISA='{}' is not a CPU kernel level: use scalar, avx2, avx512f or native (or unset it)",
               text);
}

}  // namespace

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

}  // namespace nvfp4lm::cpu
