// Forced into every .cu file of the emulated build (g++ -include, see CMakeLists.txt and docs/cuda-emulation.md):
// the project's unchanged kernels then compile as C++ against the emulated device.
//  - __global__, __device__, __host__, __forceinline__, __launch_bounds__ and __grid_constant__ keep the meaning
//    the CUDA headers give them under a host compiler (nothing, or inline);
//  - a raw __shared__ is an error: static shared memory is declared with NVFP4LM_SHARED and dynamic shared
//    memory with NVFP4LM_DYNAMIC_SHARED (core/cuda/launch.h), which the emulator places in the block's arena;
//  - the real cuda_bf16.h / cuda_fp16.h / cuda_fp8.h provide the number formats through their host paths;
//  - device_api.h provides the built-in variables, intrinsics, atomics and PTX twins.
#pragma once

#define NVFP4LM_CUDA_EMULATION 1
#define __launch_bounds__(...)
#define __shared__                                                                                      \
  _Pragma(                                                                                              \
      "GCC error \"raw __shared__ in an emulated kernel: use NVFP4LM_SHARED or NVFP4LM_DYNAMIC_SHARED " \
      "(core/cuda/launch.h)\"")

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "emu/device_api.h"
#include "emu/kernel_launch.h"
