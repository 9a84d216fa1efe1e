// cuBLASLt GEMM (see gemm.h). Host code only: no kernels of its own except through elementwise.h for K == 0.
//
// Row-major C [M, N] = op(A) op(B) is, read column-major, Cᵀ [N, M] = op(B)ᵀ op(A)ᵀ. A row-major matrix X
// [rows, cols] with leading dimension ld is the column-major matrix Xᵀ [cols, rows] with the same ld, so cuBLAS's
// first operand is our B (transposed iff transpose_b), its second our A (iff transpose_a), and its C our C, with
// (m, n, k) = (N, M, K). Nothing is copied.
//
// Plans (matmul descriptor, the three layouts and the heuristic's first algorithm) are cached per device, shape,
// transposes, dtypes, leading dimensions and the pointers' alignment (cuBLASLt assumes 256-byte-aligned buffers
// unless told otherwise, and a narrow()ed view may start anywhere). Plans are never destroyed.
#include "ops/cuda/gemm.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <mutex>
#include <unordered_map>

#include "core/cuda/check.h"
#include "core/error.h"
#include "ops/cuda/cublaslt.h"
#include "ops/cuda/elementwise.h"

namespace nvfp4lm::cuda {
namespace {

cudaDataType_t cuda_data_type(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return CUDA_R_32F;
    case DType::BF16:
      return CUDA_R_16BF;
    case DType::F16:
      return CUDA_R_16F;
    default:
      NVFP4LM_FAIL("gemm: no cuBLASLt type for {}", dtype_name(dtype));
  }
}

struct PlanKey {
  int device = 0;
  int64_t m = 0, n = 0, k = 0;  // cuBLAS's (column-major) sizes
  bool transpose_first = false, transpose_second = false;
  DType ab = DType::BF16, c = DType::BF16;
  int64_t ld_first = 0, ld_second = 0, ld_c = 0;
  uint32_t align_first = 0, align_second = 0, align_c = 0;
  bool operator==(const PlanKey&) const = default;
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& key) const {
    size_t hash = 1469598103934665603ull;
    auto mix = [&hash](uint64_t value) { hash = (hash ^ value) * 1099511628211ull; };
    mix(static_cast<uint64_t>(key.device));
    mix(static_cast<uint64_t>(key.m));
    mix(static_cast<uint64_t>(key.n));
    mix(static_cast<uint64_t>(key.k));
    mix((key.transpose_first ? 1u : 0u) | (key.transpose_second ? 2u : 0u) | (static_cast<unsigned>(key.ab) << 2) |
        (static_cast<unsigned>(key.c) << 10));
    mix(static_cast<uint64_t>(key.ld_first));
    mix(static_cast<uint64_t>(key.ld_second));
    mix(static_cast<uint64_t>(key.ld_c));
    mix(key.align_first | (uint64_t{key.align_second} << 16) | (uint64_t{key.align_c} << 32));
    return hash;
  }
};

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

Plan make_plan(const PlanKey& key, const CublasLtContext& context) {
  Plan plan;
  NVFP4LM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_first = key.transpose_first ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = key.transpose_second ? CUBLAS_OP_T : CUBLAS_OP_N;
  NVFP4LM_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof(op_first)));
  NVFP4LM_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof(op_second)));
  // Stored (column-major) shapes: op(first) is [m, k], op(second) is [k, n].
  const auto rows_first = static_cast<uint64_t>(key.transpose_first ? key.k : key.m);
  const auto cols_first = static_cast<uint64_t>(key.transpose_first ? key.m : key.k);
  const auto rows_second = static_cast<uint64_t>(key.transpose_second ? key.n : key.k);
  const auto cols_second = static_cast<uint64_t>(key.transpose_second ? key.k : key.n);
  const cudaDataType_t ab = cuda_data_type(key.ab), c = cuda_data_type(key.c);
  NVFP4LM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.first, ab, rows_first, cols_first, key.ld_first));
  NVFP4LM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.second, ab, rows_second, cols_second, key.ld_second));
  NVFP4LM_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&plan.c, c, static_cast<uint64_t>(key.m), static_cast<uint64_t>(key.n), key.ld_c));

  const FirstAlgorithm first = first_algorithm(context, plan.desc, plan.first, plan.second, plan.c, key.align_first,
                                               key.align_second, key.align_c);
  NVFP4LM_CHECK(first.found,
                "cuBLASLt has no algorithm for gemm (column-major m={} n={} k={}, op {}{}, {} x {} -> {}, ld {}/{}/{}, "
                "alignment {}/{}/{} bytes): status {}",
                key.m, key.n, key.k, key.transpose_first ? 'T' : 'N', key.transpose_second ? 'T' : 'N',
                dtype_name(key.ab), dtype_name(key.ab), dtype_name(key.c), key.ld_first, key.ld_second, key.ld_c,
                key.align_first, key.align_second, key.align_c, first.status);
  plan.algo = first.algo;
  return plan;
}

const Plan& plan_for(const PlanKey& key, const CublasLtContext& context) {
  static auto* mutex = new std::mutex();
  static auto* plans = new std::unordered_map<PlanKey, Plan, PlanKeyHash>();
  std::lock_guard lock(*mutex);
  auto it = plans->find(key);
  if (it == plans->end()) it = plans->emplace(key, make_plan(key, context)).first;
  return it->second;
}

}  // namespace

bool gemm_supported(DType ab, DType c) {
  if (ab == DType::F32) return c == DType::F32;
  return (ab == DType::BF16 || ab == DType::F16) && (c == ab || c == DType::F32);
}

void gemm(const GemmMatrix& a, bool transpose_a, const GemmMatrix& b, bool transpose_b, const GemmMatrix& c,
          float alpha, float beta) {
  NVFP4LM_ASSERT(a.dtype == b.dtype && gemm_supported(a.dtype, c.dtype), "gemm: unsupported dtypes {} x {} -> {}",
                 dtype_name(a.dtype), dtype_name(b.dtype), dtype_name(c.dtype));
  const int64_t m = c.rows, n = c.cols, k = transpose_a ? a.rows : a.cols;
  if (m == 0 || n == 0) return;
  const DeviceRows c_rows = matrix_rows(c.data, c.dtype, c.rows, c.cols, c.ld);
  if (k == 0) {  // C = beta * C (cuBLASLt rejects K == 0)
    if (beta == 0.f) {
      fill(c_rows, 0.f);
    } else if (beta != 1.f) {
      scale(c_rows, beta);
    }
    return;
  }
  int device = 0;
  NVFP4LM_CUDA_CHECK(cudaGetDevice(&device));
  const CublasLtContext& context = cublaslt_context();
  PlanKey key;
  key.device = device;
  key.m = n;
  key.n = m;
  key.k = k;
  key.transpose_first = transpose_b;
  key.transpose_second = transpose_a;
  key.ab = a.dtype;
  key.c = c.dtype;
  key.ld_first = b.ld;
  key.ld_second = a.ld;
  key.ld_c = c.ld;
  key.align_first = alignment_bytes(b.data);
  key.align_second = alignment_bytes(a.data);
  key.align_c = alignment_bytes(c.data);
  const Plan& plan = plan_for(key, context);
  NVFP4LM_CUBLAS_CHECK(cublasLtMatmul(context.handle, plan.desc, &alpha, b.data, plan.first, a.data, plan.second, &beta,
                                      c.data, plan.c, c.data, plan.c, &plan.algo, context.workspace,
                                      context.workspace_bytes, stream()));
}

}  // namespace nvfp4lm::cuda
