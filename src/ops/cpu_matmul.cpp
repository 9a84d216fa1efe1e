// See cpu_matmul.h.
#include "ops/cpu_matmul.h"

#include "core/error.h"

namespace nvfp4lm {

std::string_view cpu_matmul_name(CpuMatmul matmul) {
  switch (matmul) {
    case CpuMatmul::Fp32:
      return "fp32";
    case CpuMatmul::Bf16Activations:
      return "bf16";
    case CpuMatmul::Int8Activations:
      return "int8";
  }
  return "?";
}

CpuMatmul parse_cpu_matmul(std::string_view name) {
  if (name == "fp32") return CpuMatmul::Fp32;
  if (name == "bf16") return CpuMatmul::Bf16Activations;
  if (name == "int8") return CpuMatmul::Int8Activations;
  NVFP4LM_FAIL(
      "unknown --cpu-matmul '{}' (choose int8: int8 activations in the decode step's NVFP4 products and BF16 in the "
      "prefill's, the fast path; bf16: BF16 in the prefill's only; or fp32: the reference)",
      name);
}

}  // namespace nvfp4lm
