// The cuBLASLt handle and workspace of each device: created on the first GEMM on that device and kept for the
// life of the process (part of the device context, like the stream). Host code only.
#pragma once

#include <cublasLt.h>

#include <cstddef>

namespace nvfp4lm::cuda {

// Workspace handed to every cuBLASLt matmul (split-K and stream-K algorithms need one). 32 MiB is what NVIDIA
// recommends for Hopper; it is allocated once per device and counted by the MemoryTracker.
inline constexpr size_t kCublasLtWorkspaceBytes = size_t(32) << 20;

struct CublasLtContext {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

// The context of the current device. Thread-safe; the reference stays valid for the process.
const CublasLtContext& cublaslt_context();

}  // namespace nvfp4lm::cuda
