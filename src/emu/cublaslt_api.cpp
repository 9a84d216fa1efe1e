// A reference cuBLASLt for the emulated device: the handful of cublasLt* functions nvfp4lm's gemm.cpp calls,
// with cuBLASLt's column-major semantics, D = alpha op(A) op(B) + beta C, computed in fp32 (OpenBLAS sgemm on the
// operands widened to fp32: BF16 / FP16 products are exact in fp32, and cuBLASLt's CUBLAS_COMPUTE_32F also
// accumulates in fp32) and rounded once to D's type. It checks what the real library relies on and a wrong call
// would break on a GPU: matching types, shapes, leading dimensions >= rows, operands inside device allocations,
// and pointers aligned as the algorithm was chosen for (cublasLtMatmulAlgoGetHeuristic assumes 256-byte
// alignment unless the preference says less). A rejected call returns the cuBLAS status a GPU run would
// and says why on stderr. Matmuls run on the stream like kernels (stream.h).
//
// It also runs cuBLASLt's block-scaled NVFP4 matmul as the cuBLAS documentation states it (§3.1.4 "narrow
// precision", §3.1.4.4.2 "1D block scaling factors layout", §3.4.17): CUDA_R_4F_E2M1 A and B (element 2i of a column
// in the low nibble), CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3 on both with their scales in the tiled layout (rows
// padded to 128, scale columns to 4, 128 x 4 tiles row-major, inside a tile (r % 32) * 16 + (r % 128 / 32) * 4 +
// c % 4), "TN" only (A transposed, B not), k a multiple of 32, C = D BF16 / F16 / F32, on a device presenting
// compute capability 10.x or 12.x (NVFP4LM_EMU_ARCH; elsewhere the heuristic finds no algorithm, as cuBLASLt does).
//   D[i][j] = alpha · fp32( Σ_b sA[i][b] · sB[j][b] · Σ_{l<16} A[16b+l][i] · B[16b+l][j] )
// computed exactly in double and rounded once (cuBLASLt's own order is unspecified).
#include <cblas.h>
#include <cublasLt.h>
#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "core/numeric.h"
#include "emu/device_memory.h"
#include "emu/fault.h"
#include "emu/fp4_values.h"
#include "emu/settings.h"
#include "emu/stream.h"

struct cublasLtContext {
  int magic = 0x4c74;
};

namespace nvfp4lm::emu {
namespace {

struct MatmulDesc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
  int32_t scale_mode_a = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F,
          scale_mode_b = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  const void* scale_a = nullptr;  // A_SCALE_POINTER / B_SCALE_POINTER: the block scales (device memory)
  const void* scale_b = nullptr;
};

struct Layout {
  cudaDataType type;
  uint64_t rows, cols;
  int64_t ld;
};

struct Preference {
  uint64_t workspace_bytes = 0;
  uint32_t alignment[4] = {256, 256, 256, 256};  // A, B, C, D
};

// What the "algorithm" remembers: the alignments it may assume.
struct Algo {
  uint32_t magic;
  uint32_t alignment[4];
};

template <typename T, typename Opaque>
T* inside(Opaque* opaque) {
  static_assert(sizeof(T) <= sizeof(Opaque::data));
  return reinterpret_cast<T*>(opaque->data);
}

cublasStatus_t reject(cublasStatus_t status, const std::string& why) {
  std::fprintf(stderr, "nvfp4lm emulated cuBLASLt: %s\n", why.c_str());
  return status;
}

size_t element_bits(cudaDataType type) {
  switch (type) {
    case CUDA_R_32F:
      return 32;
    case CUDA_R_16BF:
    case CUDA_R_16F:
      return 16;
    case CUDA_R_4F_E2M1:
      return 4;
    default:
      return 0;
  }
}

float load(const void* base, cudaDataType type, size_t index) {
  if (type == CUDA_R_32F) return static_cast<const float*>(base)[index];
  const uint16_t bits = static_cast<const uint16_t*>(base)[index];
  return type == CUDA_R_16BF ? bf16_to_float(bits) : f16_to_float(bits);
}

void store(void* base, cudaDataType type, size_t index, float value) {
  if (type == CUDA_R_32F) {
    static_cast<float*>(base)[index] = value;
  } else {
    static_cast<uint16_t*>(base)[index] = type == CUDA_R_16BF ? float_to_bf16(value) : float_to_f16(value);
  }
}

// A column-major matrix widened to fp32 (ld = rows).
std::vector<float> widen(const void* data, const Layout& layout) {
  std::vector<float> out(layout.rows * layout.cols);
  for (uint64_t col = 0; col < layout.cols; ++col)
    for (uint64_t row = 0; row < layout.rows; ++row)
      out[col * layout.rows + row] = load(data, layout.type, col * static_cast<uint64_t>(layout.ld) + row);
  return out;
}

size_t span_bytes(const Layout& layout) {
  if (layout.rows == 0 || layout.cols == 0) return 0;
  return (((layout.cols - 1) * static_cast<uint64_t>(layout.ld) + layout.rows) * element_bits(layout.type) + 7) / 8;
}

// ---- block-scaled NVFP4 --------------------------------------------------------------------------------------------

// The cuBLAS documentation's layout of VEC16_UE4M3 scales of an operand with `rows` rows (M or N) and k_blocks scales
// a row, stated here on its own (the library's kernel that writes it is checked against a second statement).
uint64_t padded_up(uint64_t value, uint64_t multiple) { return (value + multiple - 1) / multiple * multiple; }
uint64_t vec16_scale_bytes(uint64_t rows, uint64_t k_blocks) { return padded_up(rows, 128) * padded_up(k_blocks, 4); }
uint64_t vec16_scale_offset(uint64_t r, uint64_t c, uint64_t k_blocks) {
  const uint64_t tile = (r / 128) * (padded_up(k_blocks, 4) / 4) + c / 4;
  return tile * 512 + (r % 32) * 16 + (r % 128 / 32) * 4 + c % 4;
}

// Column-major 4-bit element (row, col) of a layout.
uint32_t e2m1_code_at(const void* data, const Layout& layout, uint64_t row, uint64_t col) {
  const uint64_t index = col * static_cast<uint64_t>(layout.ld) + row;
  const uint8_t byte = static_cast<const uint8_t*>(data)[index / 2];
  return index % 2 == 0 ? byte & 0xFu : byte >> 4;
}

// Why this NVFP4 problem is not one cuBLASLt runs ("" when it is).
std::string fp4_problem_error(const MatmulDesc& md, const Layout& la, const Layout& lb, const Layout& lc) {
  const int arch = settings().arch;
  if (arch < 100)
    return fmt::format(
        "the emulated device presents {}: cuBLASLt's block-scaled FP4 matmul needs compute capability "
        "10.0 or later (NVFP4LM_EMU_ARCH)",
        arch_name(arch));
  if (la.type != CUDA_R_4F_E2M1 || lb.type != CUDA_R_4F_E2M1) return "A and B must both be CUDA_R_4F_E2M1";
  if (md.trans_a != CUBLAS_OP_T || md.trans_b != CUBLAS_OP_N)
    return "block-scaled FP4 needs A transposed and B not (the \"TN\" format)";
  if (md.scale_mode_a != CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3 ||
      md.scale_mode_b != CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3)
    return "A and B need CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3 scale modes";
  if (la.rows % 32 != 0 || la.ld % 32 != 0 || lb.ld % 32 != 0)
    return fmt::format("k ({}) and the FP4 leading dimensions ({}, {}) must be multiples of 32 (16-byte aligned)",
                       la.rows, la.ld, lb.ld);
  if (lc.type != CUDA_R_16BF && lc.type != CUDA_R_16F && lc.type != CUDA_R_32F) return "C / D must be BF16, F16 or F32";
  return {};
}

uint32_t alignment_of(const void* pointer) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

}  // namespace
}  // namespace nvfp4lm::emu

using namespace nvfp4lm::emu;

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  *handle = new cublasLtContext();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
  if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F)
    return reject(CUBLAS_STATUS_NOT_SUPPORTED, fmt::format("compute type {} / scale type {}: only CUBLAS_COMPUTE_32F "
                                                           "with CUDA_R_32F scales is emulated",
                                                           static_cast<int>(compute), static_cast<int>(scale)));
  *desc = new cublasLtMatmulDescOpaque_t{};
  *inside<MatmulDesc>(*desc) = MatmulDesc{compute, scale};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t bytes) {
  MatmulDesc& d = *inside<MatmulDesc>(desc);
  if (attr == CUBLASLT_MATMUL_DESC_TRANSA || attr == CUBLASLT_MATMUL_DESC_TRANSB) {
    if (bytes != sizeof(cublasOperation_t)) return reject(CUBLAS_STATUS_INVALID_VALUE, "TRANSA/TRANSB: wrong size");
    cublasOperation_t op;
    std::memcpy(&op, buf, sizeof(op));
    if (op != CUBLAS_OP_N && op != CUBLAS_OP_T)
      return reject(CUBLAS_STATUS_NOT_SUPPORTED, fmt::format("operation {}", static_cast<int>(op)));
    (attr == CUBLASLT_MATMUL_DESC_TRANSA ? d.trans_a : d.trans_b) = op;
    return CUBLAS_STATUS_SUCCESS;
  }
  if (attr == CUBLASLT_MATMUL_DESC_A_SCALE_MODE || attr == CUBLASLT_MATMUL_DESC_B_SCALE_MODE) {
    if (bytes != sizeof(int32_t)) return reject(CUBLAS_STATUS_INVALID_VALUE, "A/B_SCALE_MODE: wrong size");
    int32_t mode;
    std::memcpy(&mode, buf, sizeof(mode));
    if (mode != CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F && mode != CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3)
      return reject(CUBLAS_STATUS_NOT_SUPPORTED, fmt::format("scale mode {} is not emulated", mode));
    (attr == CUBLASLT_MATMUL_DESC_A_SCALE_MODE ? d.scale_mode_a : d.scale_mode_b) = mode;
    return CUBLAS_STATUS_SUCCESS;
  }
  if (attr == CUBLASLT_MATMUL_DESC_A_SCALE_POINTER || attr == CUBLASLT_MATMUL_DESC_B_SCALE_POINTER) {
    if (bytes != sizeof(void*)) return reject(CUBLAS_STATUS_INVALID_VALUE, "A/B_SCALE_POINTER: wrong size");
    std::memcpy(attr == CUBLASLT_MATMUL_DESC_A_SCALE_POINTER ? &d.scale_a : &d.scale_b, buf, sizeof(void*));
    return CUBLAS_STATUS_SUCCESS;
  }
  return reject(CUBLAS_STATUS_NOT_SUPPORTED,
                fmt::format("matmul descriptor attribute {} is not emulated", static_cast<int>(attr)));
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (element_bits(type) == 0)
    return reject(CUBLAS_STATUS_NOT_SUPPORTED, fmt::format("data type {} is not emulated", static_cast<int>(type)));
  if (ld < 1 || (rows > 0 && static_cast<uint64_t>(ld) < rows))
    return reject(CUBLAS_STATUS_INVALID_VALUE,
                  fmt::format("layout {} x {} with leading dimension {} < rows (column-major)", rows, cols, ld));
  *layout = new cublasLtMatrixLayoutOpaque_t{};
  *inside<Layout>(*layout) = Layout{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* preference) {
  *preference = new cublasLtMatmulPreferenceOpaque_t{};
  *inside<Preference>(*preference) = Preference{};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t preference) {
  delete preference;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t preference,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t bytes) {
  Preference& p = *inside<Preference>(preference);
  if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES && bytes == sizeof(uint64_t)) {
    std::memcpy(&p.workspace_bytes, buf, bytes);
    return CUBLAS_STATUS_SUCCESS;
  }
  const int index = static_cast<int>(attr) - static_cast<int>(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES);
  if (index >= 0 && index < 4 && bytes == sizeof(uint32_t)) {
    std::memcpy(&p.alignment[index], buf, bytes);
    return CUBLAS_STATUS_SUCCESS;
  }
  return reject(CUBLAS_STATUS_NOT_SUPPORTED,
                fmt::format("preference attribute {} ({} bytes) is not emulated", static_cast<int>(attr), bytes));
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t preference, int requested,
                                              cublasLtMatmulHeuristicResult_t* results, int* returned) {
  if (handle == nullptr || desc == nullptr || a == nullptr || b == nullptr || c == nullptr || d == nullptr ||
      preference == nullptr || requested < 1 || results == nullptr || returned == nullptr)
    return reject(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulAlgoGetHeuristic: null argument");
  const MatmulDesc& md = *inside<MatmulDesc>(desc);
  const Layout& la = *inside<Layout>(a);
  if (la.type == CUDA_R_4F_E2M1 || md.scale_mode_a != CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F) {
    if (md.scale_a == nullptr || md.scale_b == nullptr)
      return reject(CUBLAS_STATUS_INVALID_VALUE, "block-scaled matmul without A/B_SCALE_POINTER");
    if (const std::string error = fp4_problem_error(md, la, *inside<Layout>(b), *inside<Layout>(c)); !error.empty()) {
      *returned = 0;
      return reject(CUBLAS_STATUS_NOT_SUPPORTED, "no algorithm: " + error);
    }
  }
  const Preference& p = *inside<Preference>(preference);
  std::memset(&results[0], 0, sizeof(results[0]));
  Algo algo{0x616c676f, {p.alignment[0], p.alignment[1], p.alignment[2], p.alignment[3]}};
  static_assert(sizeof(Algo) <= sizeof(results[0].algo.data));
  std::memcpy(results[0].algo.data, &algo, sizeof(algo));
  results[0].workspaceSize = 0;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha_pointer,
                              const void* a, cublasLtMatrixLayout_t a_layout, const void* b,
                              cublasLtMatrixLayout_t b_layout, const void* beta_pointer, const void* c,
                              cublasLtMatrixLayout_t c_layout, void* d, cublasLtMatrixLayout_t d_layout,
                              const cublasLtMatmulAlgo_t* algo_pointer, void*, size_t, cudaStream_t stream) {
  if (handle == nullptr || desc == nullptr || alpha_pointer == nullptr || beta_pointer == nullptr ||
      algo_pointer == nullptr)
    return reject(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: null handle, descriptor, scalar or algorithm");
  if (sticky_error() != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
  const MatmulDesc md = *inside<MatmulDesc>(desc);
  const Layout la = *inside<Layout>(a_layout), lb = *inside<Layout>(b_layout), lc = *inside<Layout>(c_layout),
               ld = *inside<Layout>(d_layout);
  Algo algo;
  std::memcpy(&algo, algo_pointer->data, sizeof(algo));
  if (algo.magic != 0x616c676f)
    return reject(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: the algorithm was not made by the heuristic");
  const bool ta = md.trans_a == CUBLAS_OP_T, tb = md.trans_b == CUBLAS_OP_T;
  const uint64_t m = ta ? la.cols : la.rows, k = ta ? la.rows : la.cols;
  const uint64_t kb = tb ? lb.cols : lb.rows, n = tb ? lb.rows : lb.cols;
  const bool fp4 = la.type == CUDA_R_4F_E2M1;
  if (fp4) {
    if (const std::string error = fp4_problem_error(md, la, lb, lc); !error.empty())
      return reject(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul: " + error);
  }
  if (la.type != lb.type || lc.type != ld.type)
    return reject(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul: A and B (or C and D) have different types");
  if (!fp4 && !(la.type == CUDA_R_32F ? lc.type == CUDA_R_32F : (lc.type == la.type || lc.type == CUDA_R_32F)))
    return reject(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul: unsupported A/B -> C type combination");
  if (k != kb || lc.rows != m || lc.cols != n || ld.rows != m || ld.cols != n || lc.ld != ld.ld || c != d)
    return reject(CUBLAS_STATUS_INVALID_VALUE,
                  fmt::format("cublasLtMatmul: shapes do not agree: op(A) {} x {}, op(B) {} x {}, C {} x {}, D {} x {} "
                              "(in-place C == D with one layout is what is emulated)",
                              m, k, kb, n, lc.rows, lc.cols, ld.rows, ld.cols));
  const void* operands[4] = {a, b, c, d};
  const Layout* layouts[4] = {&la, &lb, &lc, &ld};
  const char* names[4] = {"A", "B", "C", "D"};
  for (int i = 0; i < 4; ++i) {
    if (alignment_of(operands[i]) < algo.alignment[i])
      return reject(CUBLAS_STATUS_INVALID_VALUE,
                    fmt::format("cublasLtMatmul: {} at {} is {}-byte aligned but the algorithm was chosen for {}-byte "
                                "alignment (set CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{}_BYTES)",
                                names[i], operands[i], alignment_of(operands[i]), algo.alignment[i], names[i]));
    const size_t span = span_bytes(*layouts[i]);
    if (span > 0 && !is_device_range(operands[i], span))
      return reject(
          CUBLAS_STATUS_INVALID_VALUE,
          fmt::format("cublasLtMatmul: {} [{}, +{}) is not inside one device allocation", names[i], operands[i], span));
  }
  float alpha, beta;
  std::memcpy(&alpha, alpha_pointer, sizeof(alpha));  // CUBLASLT_POINTER_MODE_HOST: read at the call
  std::memcpy(&beta, beta_pointer, sizeof(beta));
  if (fp4) {
    const uint64_t k_blocks = k / 16;
    const void* scales[2] = {md.scale_a, md.scale_b};
    const uint64_t scale_rows[2] = {m, n};
    for (int i = 0; i < 2; ++i) {
      const uint64_t bytes = vec16_scale_bytes(scale_rows[i], k_blocks);
      if (alignment_of(scales[i]) < 16 || !is_device_range(scales[i], bytes))
        return reject(CUBLAS_STATUS_INVALID_VALUE,
                      fmt::format("cublasLtMatmul: {}'s block scales at {} must be 16-byte aligned and hold {} bytes "
                                  "(rows padded to 128, k/16 to 4) inside one device allocation",
                                  names[i], scales[i], bytes));
    }
    Work work;
    work.what = fmt::format("cublasLtMatmul NVFP4 block-scaled m={} n={} k={}", m, n, k);
    work.run = [=](std::string&) {
      const auto* sa = static_cast<const uint8_t*>(md.scale_a);
      const auto* sb = static_cast<const uint8_t*>(md.scale_b);
      for (uint64_t j = 0; j < n; ++j)
        for (uint64_t i = 0; i < m; ++i) {
          double sum = 0.0;  // every product and partial sum is exact in double
          for (uint64_t blk = 0; blk < k_blocks; ++blk) {
            double block = 0.0;
            for (uint64_t l = 16 * blk; l < 16 * blk + 16; ++l)  // op(A)[i][l] = A[l][i]; op(B)[l][j] = B[l][j]
              block += e2m1_code_value(e2m1_code_at(a, la, l, i)) * e2m1_code_value(e2m1_code_at(b, lb, l, j));
            sum += block * ue4m3_value(sa[vec16_scale_offset(i, blk, k_blocks)] & 0x7F) *
                   ue4m3_value(sb[vec16_scale_offset(j, blk, k_blocks)] & 0x7F);
          }
          float value = alpha * static_cast<float>(sum);
          if (beta != 0.0f) value += beta * load(c, lc.type, j * static_cast<uint64_t>(lc.ld) + i);
          store(d, ld.type, j * static_cast<uint64_t>(ld.ld) + i, value);
        }
      return true;
    };
    if (submit(stream, std::move(work)) != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
    return CUBLAS_STATUS_SUCCESS;
  }

  Work work;
  work.what = fmt::format("cublasLtMatmul m={} n={} k={}", m, n, k);
  work.run = [=](std::string&) {
    const std::vector<float> wa = widen(a, la), wb = widen(b, lb);
    std::vector<float> wc = beta != 0.0f ? widen(c, lc) : std::vector<float>(m * n, 0.0f);
    if (k > 0 && m > 0 && n > 0) {
      cblas_sgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
                  static_cast<int>(n), static_cast<int>(k), alpha, wa.data(), static_cast<int>(la.rows), wb.data(),
                  static_cast<int>(lb.rows), beta, wc.data(), static_cast<int>(m));
    } else {
      for (float& value : wc) value *= beta;
    }
    for (uint64_t col = 0; col < n; ++col)
      for (uint64_t row = 0; row < m; ++row)
        store(d, ld.type, col * static_cast<uint64_t>(ld.ld) + row, wc[col * m + row]);
    return true;
  };
  if (submit(stream, std::move(work)) != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
