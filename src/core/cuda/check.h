// CUDA error checking for .cu and CUDA-side .cpp files. Every runtime/cuBLAS call is wrapped; every kernel
// launch is followed by NVFP4LM_CUDA_CHECK_LAUNCH(). Failures throw nvfp4lm::Error with the call and location.
#pragma once

#include <cuda_runtime.h>

#include "core/cuda/runtime.h"

namespace nvfp4lm::cuda {

[[noreturn]] void fail(cudaError_t status, const char* expr, const char* file, int line);
[[noreturn]] void fail_cublas(int status, const char* expr, const char* file, int line);

inline cudaStream_t stream() { return static_cast<cudaStream_t>(current_stream_handle()); }

}  // namespace nvfp4lm::cuda

#define NVFP4LM_CUDA_CHECK(expr)                                         \
  do {                                                                   \
    cudaError_t nvfp4lm_status_ = (expr);                                \
    if (nvfp4lm_status_ != cudaSuccess) [[unlikely]]                     \
      ::nvfp4lm::cuda::fail(nvfp4lm_status_, #expr, __FILE__, __LINE__); \
  } while (0)

#define NVFP4LM_CUDA_CHECK_LAUNCH() NVFP4LM_CUDA_CHECK(cudaGetLastError())

#define NVFP4LM_CUBLAS_CHECK(expr)                                              \
  do {                                                                          \
    int nvfp4lm_status_ = static_cast<int>(expr);                               \
    if (nvfp4lm_status_ != 0) [[unlikely]]                                      \
      ::nvfp4lm::cuda::fail_cublas(nvfp4lm_status_, #expr, __FILE__, __LINE__); \
  } while (0)
