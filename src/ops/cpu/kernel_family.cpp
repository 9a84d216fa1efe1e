// See kernel_family.h: the list of every family.
#include "ops/cpu/kernel_family.h"

#include "ops/cpu/attention.h"
#include "ops/cpu/bf16_dot.h"
#include "ops/cpu/bf16_gemm.h"
#include "ops/cpu/cross_entropy.h"
#include "ops/cpu/dense_dot.h"
#include "ops/cpu/int8_weight_dot.h"
#include "ops/cpu/nvfp4_dot.h"
#include "ops/cpu/nvfp4_int8_dot.h"
#include "ops/cpu/nvfp4_interleaved.h"
#include "ops/cpu/swiglu.h"

namespace nvfp4lm::cpu {

std::vector<const KernelFamilyInfo*> cpu_kernel_families() {
  return {&nvfp4_dot_family(),           &nvfp4_int8_dot_family(),   &nvfp4_interleaved_family(),
          &dense_dot_family(),           &int8_weight_dot_family(),  &bf16_dot_family(),
          &bf16_gemm_family(),           &attention_kernel_family(), &swiglu_kernel_family(),
          &cross_entropy_kernel_family()};
}

}  // namespace nvfp4lm::cpu
