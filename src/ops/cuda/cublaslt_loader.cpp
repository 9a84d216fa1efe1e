// The cuBLASLt entry points nvfp4lm calls, loaded with dlopen on the first GEMM instead of linked: a linked
// libcublasLt (~200 MB of RSS and startup time) would be mapped by every command, `--version` and CPU runs
// included. Each function below has cublasLt.h's exact signature and forwards to the library's own, resolved
// once. A missing or unloadable library is an Error naming it and how to fix it, raised where CUDA GEMMs start.
// The emulated build has its own cuBLASLt (emu/) and does not compile this file's body.
#if !NVFP4LM_CUDA_EMULATION

#include <cublasLt.h>
#include <dlfcn.h>

#include <mutex>
#include <string>

#include "core/error.h"

namespace nvfp4lm::cuda {
namespace {

// The soname of the toolkit this build was compiled against (found through the loader's path), then the same
// file in that toolkit's library directory (a toolkit not registered with ldconfig).
constexpr const char* kLibraryNames[] = {"libcublasLt.so." NVFP4LM_CUBLASLT_SOVERSION,
                                         NVFP4LM_CUBLASLT_DIR "/libcublasLt.so." NVFP4LM_CUBLASLT_SOVERSION};

void* cublaslt_library() {
  static std::once_flag once;
  static void* handle = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    for (const char* name : kLibraryNames) {
      handle = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (handle != nullptr) return;
      failure = ::dlerror();
    }
  });
  NVFP4LM_CHECK(handle != nullptr,
                "cannot load cuBLASLt ({}: {}); install the CUDA {} runtime libraries or add their directory to "
                "LD_LIBRARY_PATH",
                kLibraryNames[0], failure, NVFP4LM_CUBLASLT_SOVERSION);
  return handle;
}

template <typename Function>
Function* resolve(const char* name) {
  void* symbol = ::dlsym(cublaslt_library(), name);
  NVFP4LM_CHECK(symbol != nullptr, "{} has no {}: the cuBLASLt library found is older than this build needs",
                kLibraryNames[0], name);
  return reinterpret_cast<Function*>(symbol);
}

}  // namespace
}  // namespace nvfp4lm::cuda

// One resolved pointer per entry point (a function-local static: thread-safe, resolved on first use).
#define NVFP4LM_CUBLASLT_REAL(name) static auto* const real = ::nvfp4lm::cuda::resolve<decltype(::name)>(#name)

cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t* lightHandle) {
  NVFP4LM_CUBLASLT_REAL(cublasLtCreate);
  return real(lightHandle);
}

cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t lightHandle) {
  NVFP4LM_CUBLASLT_REAL(cublasLtDestroy);
  return real(lightHandle);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                                           const void* alpha, const void* A, cublasLtMatrixLayout_t Adesc,
                                           const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,
                                           cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                                           const cublasLtMatmulAlgo_t* algo, void* workspace,
                                           size_t workspaceSizeInBytes, cudaStream_t stream) {
  NVFP4LM_CUBLASLT_REAL(cublasLtMatmul);
  return real(lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace,
              workspaceSizeInBytes, stream);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc, cublasComputeType_t computeType,
                                                     cudaDataType_t scaleType) {
  NVFP4LM_CUBLASLT_REAL(cublasLtMatmulDescCreate);
  return real(matmulDesc, computeType, scaleType);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  NVFP4LM_CUBLASLT_REAL(cublasLtMatmulDescDestroy);
  return real(matmulDesc);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                           cublasLtMatmulDescAttributes_t attr, const void* buf,
                                                           size_t sizeInBytes) {
  NVFP4LM_CUBLASLT_REAL(cublasLtMatmulDescSetAttribute);
  return real(matmulDesc, attr, buf, sizeInBytes);
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout, cudaDataType type,
                                                       uint64_t rows, uint64_t cols, int64_t ld) {
  NVFP4LM_CUBLASLT_REAL(cublasLtMatrixLayoutCreate);
  return real(matLayout, type, rows, cols, ld);
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  NVFP4LM_CUBLASLT_REAL(cublasLtMatrixLayoutDestroy);
  return real(matLayout);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  NVFP4LM_CUBLASLT_REAL(cublasLtMatmulPreferenceCreate);
  return real(pref);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  NVFP4LM_CUBLASLT_REAL(cublasLtMatmulPreferenceDestroy);
  return real(pref);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                                 cublasLtMatmulPreferenceAttributes_t attr,
                                                                 const void* buf, size_t sizeInBytes) {
  NVFP4LM_CUBLASLT_REAL(cublasLtMatmulPreferenceSetAttribute);
  return real(pref, attr, buf, sizeInBytes);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returnAlgoCount) {
  NVFP4LM_CUBLASLT_REAL(cublasLtMatmulAlgoGetHeuristic);
  return real(lightHandle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, preference, requestedAlgoCount,
              heuristicResultsArray, returnAlgoCount);
}

#undef NVFP4LM_CUBLASLT_REAL

#endif  // !NVFP4LM_CUDA_EMULATION
