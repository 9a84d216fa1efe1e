// See cpu_matmul.h.
#include "ops/cpu_matmul.h"

#include "core/error.h"

namespace nvfp4lm {

std::string_view cpu_matmul_name(CpuMatmul matmul) { return matmul == CpuMatmul::Fp32 ? "fp32" : "bf16"; }

CpuMatmul parse_cpu_matmul(std::string_view name) {
  if (name == "fp32") return CpuMatmul::Fp32;
  if (name == "bf16") return CpuMatmul::Bf16Activations;
  NVFP4LM_FAIL(
      "unknown --cpu-matmul '{}' (choose bf16: BF16 activations in the prefill's products, the fast path; "
      "or fp32: the reference)",
      name);
}

}  // namespace nvfp4lm
