// See cpu_backend.h.
#include "ops/cpu_backend.h"

#include <cblas.h>
#include <omp.h>

#include "ops/cpu/bf16_gemm.h"
#include "ops/cpu/cpu_features.h"
#include "ops/cpu/kernel_family.h"
#include "ops/cpu/nvfp4_dot.h"
#include "ops/cpu/nvfp4_int8_dot.h"
#include "ops/cpu/nvfp4_interleaved.h"
#include "ops/cpu/nvfp4_linear.h"

namespace nvfp4lm {

const char* cpu_blas_threading() {
  switch (openblas_get_parallel()) {
    case 0:
      return "sequential";
    case 1:
      return "pthreads";
    case 2:
      return "OpenMP";
  }
  return "unknown";
}

std::string cpu_blas_threading_warning() {
  if (openblas_get_parallel() != 1 || omp_get_max_threads() < 2) return {};
  return "OpenBLAS here is its pthreads build, whose spinning threads slow nvfp4lm's OpenMP CPU kernels (prefill "
         "~2.7x); install Debian's libopenblas-openmp-dev (scripts/setup-deps.sh does) and rebuild, or set "
         "OPENBLAS_NUM_THREADS=1";
}

std::string cpu_nvfp4_dot_kernel(CpuMatmul matmul) {
  if (matmul != CpuMatmul::Int8Activations) return cpu::nvfp4_dot_family().chosen().name();
  if (cpu::int8_decode_interleaves())
    return std::string(cpu::nvfp4_interleaved_family().chosen().name()) + ", 16-row interleaved";
  return cpu::nvfp4_int8_dot_family().chosen().name();
}

const char* cpu_bf16_kernel() { return cpu::bf16_gemm_family().chosen().name(); }

std::string cpu_isa_limit_note() {
  const cpu::IsaLevel limit = cpu::cpu_isa_limit();
  if (limit == cpu::IsaLevel::Native) return {};
  return std::string(", capped by NVFP4LM_CPU_ISA=") + cpu::isa_level_name(limit);
}

std::string cpu_kernel_features() { return cpu::cpu_features_present().names(); }

std::vector<std::pair<std::string, std::string>> cpu_kernel_variants() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const cpu::KernelFamilyInfo* family : cpu::cpu_kernel_families())
    out.emplace_back(family->name(), family->chosen_isa().name);
  return out;
}

}  // namespace nvfp4lm
