// Per-device cuBLASLt handles and workspaces (see cublaslt.h).
#include "ops/cuda/cublaslt.h"

#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <utility>

#include "core/cuda/check.h"
#include "core/cuda/runtime.h"
#include "core/memory.h"

namespace nvfp4lm::cuda {

const CublasLtContext& cublaslt_context() {
  // Never destroyed: handles and workspaces are returned to the driver when the process ends.
  static auto* mutex = new std::mutex();
  static auto* contexts = new std::map<int, CublasLtContext>();
  int device = 0;
  NVFP4LM_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard lock(*mutex);
  auto it = contexts->find(device);
  if (it != contexts->end()) return it->second;
  CublasLtContext context;
  NVFP4LM_CUBLAS_CHECK(cublasLtCreate(&context.handle));
  MemoryTracker::instance().reserve(Device::cuda(device), kCublasLtWorkspaceBytes, "cuBLASLt workspace");
  context.workspace = device_malloc(device, kCublasLtWorkspaceBytes);
  context.workspace_bytes = kCublasLtWorkspaceBytes;
  return contexts->emplace(device, context).first->second;
}

FirstAlgorithm first_algorithm(const CublasLtContext& context, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                               cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, uint32_t align_a, uint32_t align_b,
                               uint32_t align_c) {
  cublasLtMatmulPreference_t preference = nullptr;
  NVFP4LM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  const uint64_t workspace = context.workspace_bytes;
  NVFP4LM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                            &workspace, sizeof(workspace)));
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_c}};
  for (const auto& [attribute, value] : alignments)
    NVFP4LM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof(value)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(context.handle, desc, a, b, c, c, preference, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  FirstAlgorithm first;
  first.found = status == CUBLAS_STATUS_SUCCESS && found > 0;
  first.status = static_cast<int>(status);
  first.algo = result.algo;
  return first;
}

}  // namespace nvfp4lm::cuda
