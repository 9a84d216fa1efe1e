// Kernel launches and shared-memory declarations: the only CUDA syntax whose spelling differs between the real
// build (nvcc) and the emulated one (g++ against emu/, docs/cuda-emulation.md). Kernels use these
// three macros and never write <<<>>> or __shared__ themselves, so both builds compile the same source:
//
//   NVFP4LM_LAUNCH(kernel, grid, block, shared_bytes)(args...);   // on stream(); then NVFP4LM_CUDA_CHECK_LAUNCH()
//   NVFP4LM_LAUNCH_ON(kernel, grid, block, shared_bytes, s)(...);  // on another stream s
//   NVFP4LM_SHARED(float[4][16], partial);                          // a block's static shared variable
//   NVFP4LM_DYNAMIC_SHARED(unsigned char, smem);                    // the launch's dynamic shared memory
//
// A kernel template with several arguments goes in parentheses: NVFP4LM_LAUNCH((quantize_kernel<In, kOut>), ...).
// In the emulated build a launch also carries the kernel's name, so device faults name the kernel.
#pragma once

#include "core/cuda/check.h"

namespace nvfp4lm::cuda {
// Lets an array type be written as one macro argument: Declared<float[4][16]> is float[4][16].
template <typename T>
using Declared = T;
}  // namespace nvfp4lm::cuda

#if defined(NVFP4LM_CUDA_EMULATION) && NVFP4LM_CUDA_EMULATION

#define NVFP4LM_LAUNCH_ON(kernel, grid, block, shared_bytes, stream) \
  ::nvfp4lm::emu::KernelLaunch<kernel>(grid, block, shared_bytes, stream)
#define NVFP4LM_SHARED(type, name)                                                               \
  static constexpr ::nvfp4lm::emu::SharedSite nvfp4lm_shared_site_##name{                        \
      sizeof(::nvfp4lm::cuda::Declared<type>), alignof(::nvfp4lm::cuda::Declared<type>), #name}; \
  ::nvfp4lm::cuda::Declared<type>& name =                                                        \
      *static_cast<::nvfp4lm::cuda::Declared<type>*>(::nvfp4lm::emu::static_shared(nvfp4lm_shared_site_##name))
#define NVFP4LM_DYNAMIC_SHARED(type, name) type* const name = static_cast<type*>(::nvfp4lm::emu::dynamic_shared())

#else

#define NVFP4LM_LAUNCH_ON(kernel, grid, block, shared_bytes, stream) kernel<<<grid, block, shared_bytes, stream>>>
#define NVFP4LM_SHARED(type, name) __shared__ ::nvfp4lm::cuda::Declared<type> name
#define NVFP4LM_DYNAMIC_SHARED(type, name) extern __shared__ __align__(128) type name[]

#endif

#define NVFP4LM_LAUNCH(kernel, grid, block, shared_bytes) \
  NVFP4LM_LAUNCH_ON(kernel, grid, block, shared_bytes, ::nvfp4lm::cuda::stream())
