// Per-device cuBLASLt handles and workspaces (see cublaslt.h).
#include "ops/cuda/cublaslt.h"

#include <cuda_runtime.h>

#include <map>
#include <mutex>

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

}  // namespace nvfp4lm::cuda
