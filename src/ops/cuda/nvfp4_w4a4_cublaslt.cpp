// See nvfp4_w4a4_cublaslt.h. Plans (descriptor, layouts, the heuristic's first algorithm) are cached per device and
// shape like gemm.cpp's; the scale pointers are set on the descriptor at each call, under the plan's lock, since they
// change from call to call.
#include "ops/cuda/nvfp4_w4a4_cublaslt.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "core/cuda/check.h"
#include "core/error.h"
#include "ops/cuda/cublaslt.h"
#include "ops/cuda/nvfp4_block_scale_layout.h"

namespace nvfp4lm::cuda {
namespace {

struct Fp4Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t w = nullptr, x = nullptr, y = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;
  int status = 0;
};

// (device, m, n, k, y row stride, alignment of w codes / x codes / y)
using Fp4PlanKey = std::tuple<int, int64_t, int64_t, int64_t, int64_t, uint32_t, uint32_t, uint32_t>;

Fp4Plan make_fp4_plan(int64_t m, int64_t n, int64_t k, int64_t ld_y, uint32_t align_w, uint32_t align_x,
                      uint32_t align_y, const CublasLtContext& context) {
  Fp4Plan plan;
  NVFP4LM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_w = CUBLAS_OP_T, op_x = CUBLAS_OP_N;
  NVFP4LM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_w, sizeof(op_w)));
  NVFP4LM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_x, sizeof(op_x)));
  const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3;
  NVFP4LM_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode)));
  NVFP4LM_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode)));
  // The heuristic wants scale pointers set (any 16-byte aligned address; each call sets the real ones).
  const void* placeholder = context.workspace;
  NVFP4LM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &placeholder,
                                                      sizeof(placeholder)));
  NVFP4LM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &placeholder,
                                                      sizeof(placeholder)));
  // Column-major: w is K x N (ld K), x is K x M (ld K), y is N x M (ld = y's row stride).
  NVFP4LM_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&plan.w, CUDA_R_4F_E2M1, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k));
  NVFP4LM_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&plan.x, CUDA_R_4F_E2M1, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k));
  NVFP4LM_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&plan.y, CUDA_R_16BF, static_cast<uint64_t>(n), static_cast<uint64_t>(m), ld_y));
  const FirstAlgorithm first = first_algorithm(context, plan.desc, plan.w, plan.x, plan.y, align_w, align_x, align_y);
  plan.status = first.status;
  plan.found = first.found;
  plan.algo = first.algo;
  return plan;
}

std::mutex& fp4_plan_mutex() {
  static auto* mutex = new std::mutex();
  return *mutex;
}

// Under fp4_plan_mutex(). Plans are never destroyed.
Fp4Plan& fp4_plan_for(const Fp4PlanKey& key, const CublasLtContext& context) {
  static auto* plans = new std::map<Fp4PlanKey, Fp4Plan>();
  auto it = plans->find(key);
  if (it == plans->end()) {
    const auto& [device, m, n, k, ld_y, align_w, align_x, align_y] = key;
    it = plans->emplace(key, make_fp4_plan(m, n, k, ld_y, align_w, align_x, align_y, context)).first;
  }
  return it->second;
}

}  // namespace

bool nvfp4_w4a4_cublaslt_available(const char** why_not) {
  static const std::string not_10x =
      "the GPU is not a Blackwell data-center GPU (compute capability 10.x: B200 / GB200 / B300), where cuBLASLt's "
      "block-scaled FP4 matmul is used";
  static auto* mutex = new std::mutex();
  static auto* probed = new std::map<int, std::string>();  // per device: "" where cuBLASLt has the matmul
  int device = 0, major = 0;
  NVFP4LM_CUDA_CHECK(cudaGetDevice(&device));
  NVFP4LM_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  const std::string* reason = &not_10x;
  if (major == 10) {
    std::lock_guard lock(*mutex);
    auto it = probed->find(device);
    if (it == probed->end()) {
      std::string probe_failure;
      try {
        const CublasLtContext& context = cublaslt_context();
        const std::lock_guard plans(fp4_plan_mutex());
        const Fp4Plan& probe = fp4_plan_for(Fp4PlanKey{device, 128, 128, 64, 128, 256, 256, 256}, context);
        if (!probe.found)
          probe_failure = "this cuBLASLt has no NVFP4 block-scaled matmul for the device (heuristic status " +
                          std::to_string(probe.status) + "; CUDA 12.8 or later has one)";
      } catch (const Error& error) {
        probe_failure = std::string("cuBLASLt: ") + error.what();
      }
      it = probed->emplace(device, probe_failure).first;
    }
    reason = &it->second;
  }
  if (why_not) *why_not = reason->empty() ? nullptr : reason->c_str();
  return reason->empty();
}

bool nvfp4_w4a4_cublaslt_supported(const Nvfp4W4a4Gemm& problem) {
  auto aligned16 = [](const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; };
  return problem.k > 0 && problem.k % 32 == 0 && problem.x.rows >= 0 && problem.w.rows >= 0 &&
         aligned16(problem.x.codes) && aligned16(problem.w.codes) && aligned16(problem.y) &&
         problem.y_row_stride % 8 == 0 && problem.y_row_stride >= problem.w.rows;
}

int64_t nvfp4_cublaslt_scale_bytes(int64_t rows, int64_t k) { return block_scale_layout_bytes(rows, k / 16); }

void nvfp4_w4a4_cublaslt_gemm(const Nvfp4W4a4Gemm& problem, const uint8_t* x_scales, const uint8_t* w_scales) {
  const int64_t m = problem.x.rows, n = problem.w.rows, k = problem.k;
  if (m == 0 || n == 0) return;
  int device = 0;
  NVFP4LM_CUDA_CHECK(cudaGetDevice(&device));
  const CublasLtContext& context = cublaslt_context();
  const std::lock_guard lock(fp4_plan_mutex());
  Fp4Plan& plan = fp4_plan_for(Fp4PlanKey{device, m, n, k, problem.y_row_stride, alignment_bytes(problem.w.codes),
                                          alignment_bytes(problem.x.codes), alignment_bytes(problem.y)},
                               context);
  NVFP4LM_CHECK(plan.found,
                "cuBLASLt has no NVFP4 block-scaled algorithm for y [{}, {}] = x [{}, {}] · w [{}, {}]ᵀ (status {})", m,
                n, m, k, n, k, plan.status);
  // cuBLAS's A is w, its B is x.
  NVFP4LM_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scales, sizeof(w_scales)));
  NVFP4LM_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scales, sizeof(x_scales)));
  const float alpha = problem.alpha, beta = 0.0f;
  NVFP4LM_CUBLAS_CHECK(cublasLtMatmul(context.handle, plan.desc, &alpha, problem.w.codes, plan.w, problem.x.codes,
                                      plan.x, &beta, problem.y, plan.y, problem.y, plan.y, &plan.algo,
                                      context.workspace, context.workspace_bytes, stream()));
}

}  // namespace nvfp4lm::cuda
