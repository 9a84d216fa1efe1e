// The cuBLASLt handle and workspace of each device: created on the first GEMM on that device and kept for the
// life of the process (part of the device context, like the stream). Host code only.
#pragma once

#include <cublasLt.h>

#include <cstddef>
#include <cstdint>

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

// The heuristic's first algorithm for a matmul (D laid out as C), with the context's workspace and the operands'
// alignments as given; `found` false (and cuBLAS's status) when there is none.
struct FirstAlgorithm {
  cublasLtMatmulAlgo_t algo{};
  bool found = false;
  int status = 0;
};
FirstAlgorithm first_algorithm(const CublasLtContext& context, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                               cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, uint32_t align_a, uint32_t align_b,
                               uint32_t align_c);

// Largest power of two (<= 256) that divides the address: what a plan may assume (cuBLASLt assumes 256-byte aligned
// operands unless its preference says less).
inline uint32_t alignment_bytes(const void* pointer) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

}  // namespace nvfp4lm::cuda
