// NVFP4 quantize / dequantize / fake-quantize: argument checks, the CPU reference (fp32, OpenMP over rows or
// 16-row tiles) and the dispatch to the CUDA twin (quant/cuda/nvfp4.cu) for tensors on a GPU. The rules for
// one block and one element are in nvfp4_block.h, shared with the twin so both give the same bytes.
// Quantization is two passes over the input: the tensor amax (quant/tensor_amax.h, which also finds non-finite
// values), then blocks. Fake quantization runs the same second pass but writes decoded values instead of codes, so it
// equals dequantize(quantize(w)) bit for bit.
#include "quant/nvfp4.h"

#include <algorithm>
#include <cmath>

#include "core/numeric.h"
#include "core/rng.h"
#include "quant/nvfp4_block.h"
#include "quant/tensor_amax.h"

#if NVFP4LM_HAS_CUDA
#include "quant/cuda/nvfp4_cuda.h"
#endif

namespace nvfp4lm {
namespace {

constexpr int64_t kBlock = kNvfp4BlockSize;
// Below this many elements a parallel region costs more than it saves (and small matrices are common in tests).
constexpr int64_t kParallelElements = int64_t{1} << 15;

int64_t rows_per_block(Nvfp4Block block) { return block == Nvfp4Block::Tile16x16 ? kBlock : 1; }

void check_weight(const Tensor& weight, const Nvfp4QuantOptions& options, const char* what) {
  NVFP4LM_CHECK(weight.defined(), "{}: cannot NVFP4-quantize an undefined tensor", what);
  NVFP4LM_CHECK(weight.rank() == 2, "{}: NVFP4 quantization needs a [rows, cols] matrix, got {}", what, weight.str());
  NVFP4LM_CHECK(weight.dtype() == DType::F32 || weight.dtype() == DType::BF16,
                "{}: NVFP4 quantization reads F32 or BF16, got {}", what, weight.str());
  NVFP4LM_CHECK(weight.dim(1) % kBlock == 0 && weight.dim(1) > 0,
                "{}: shape {} has {} columns; NVFP4 needs a positive multiple of the block size 16", what,
                weight.shape().str(), weight.dim(1));
  NVFP4LM_CHECK(options.block != Nvfp4Block::Tile16x16 || weight.dim(0) % kBlock == 0,
                "{}: shape {} has {} rows; 16x16 NVFP4 tiles need a multiple of 16 (or use 1x16 blocks)", what,
                weight.shape().str(), weight.dim(0));
  NVFP4LM_CHECK(weight.device().is_cpu() || weight.is_contiguous(),
                "{}: NVFP4 quantization on {} needs a contiguous tensor, got strides of a view", what,
                weight.device().str());
}

void check_output(const Tensor& out, int64_t rows, int64_t cols, Device device, const char* what) {
  NVFP4LM_CHECK(out.defined() && out.rank() == 2 && out.dim(0) == rows && out.dim(1) == cols,
                "{}: NVFP4 output must be [{}, {}], got {}", what, rows, cols, out.str());
  NVFP4LM_CHECK(out.dtype() == DType::F32 || out.dtype() == DType::BF16, "{}: NVFP4 output must be F32 or BF16, got {}",
                what, out.str());
  NVFP4LM_CHECK(out.device() == device, "{}: NVFP4 output is on {}, the input on {}", what, out.device().str(),
                device.str());
  NVFP4LM_CHECK(out.is_contiguous(), "{}: NVFP4 output {} must be contiguous", what, out.str());
}

inline float load(const float* data, int64_t index) { return data[index]; }
inline float load(const uint16_t* data, int64_t index) { return bf16_to_float(data[index]); }

inline void store(float* data, int64_t index, float value) { data[index] = value; }
inline void store(uint16_t* data, int64_t index, float value) { data[index] = float_to_bf16(value); }

// The second pass. For each block (16 columns of one row, or of a 16-row tile) computes the scale byte and
// the 16 codes of each of its rows, then hands them to emit(row, block_index, codes, scale_byte,
// denominator). Every row's codes are computed before they are emitted, so emit may overwrite the input.
template <typename T, typename Emit>
void quantize_blocks_cpu(const T* data, int64_t rows, int64_t cols, float tensor_scale,
                         const Nvfp4QuantOptions& options, Emit emit) {
  const int64_t group_rows = rows_per_block(options.block);
  const int64_t groups = rows / group_rows;
  const int64_t col_blocks = cols / kBlock;
  const bool stochastic = options.rounding == Rounding::Stochastic;
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelElements)
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t row0 = g * group_rows;
    for (int64_t b = 0; b < col_blocks; ++b) {
      float block_amax = 0.0f;
      for (int64_t r = row0; r < row0 + group_rows; ++r)
        for (int64_t k = 0; k < kBlock; ++k)
          block_amax = std::max(block_amax, std::fabs(load(data, r * cols + b * kBlock + k)));
      const uint8_t scale_byte = nvfp4_block_scale_byte(block_amax, tensor_scale);
      const float denominator = nvfp4_dequant_scale(scale_byte, tensor_scale);
      for (int64_t r = row0; r < row0 + group_rows; ++r) {
        const int64_t first = r * cols + b * kBlock;
        float x[kBlock];
        for (int64_t k = 0; k < kBlock; ++k) x[k] = load(data, first + k);
        uint8_t codes[kBlock] = {};
        if (denominator == 0.0f) {
          // all codes 0 (nvfp4_encode_*)
        } else if (stochastic) {
          for (int64_t k = 0; k < kBlock; ++k)
            codes[k] = float_to_e2m1_stochastic(x[k] / denominator,
                                                counter_uniform(options.seed, static_cast<uint64_t>(first + k)));
        } else {
          for (int64_t k = 0; k < kBlock; ++k) codes[k] = float_to_e2m1_rne(x[k] / denominator);
        }
        emit(r, b, codes, scale_byte, denominator);
      }
    }
  }
}

// The caller's tensor scale when it set one (shared q/k/v or gate/up scales, `.dat`'s 1), else amax / (6*448).
// The amax pass runs either way: it is also the check for non-finite input.
float chosen_tensor_scale(const Nvfp4QuantOptions& options, float amax) {
  return options.tensor_scale > 0.0f ? options.tensor_scale : nvfp4_tensor_scale(amax);
}

// Into q's codes and block scales (allocated, contiguous, CPU); sets q.tensor_scale.
template <typename T>
void quantize_cpu_into(const T* data, float tensor_scale, const Nvfp4QuantOptions& options, Nvfp4Tensor& q) {
  const int64_t rows = q.rows, cols = q.cols;
  q.tensor_scale = tensor_scale;
  uint8_t* codes_out = static_cast<uint8_t*>(q.codes.raw());
  uint8_t* scales_out = static_cast<uint8_t*>(q.block_scales.raw());
  const int64_t col_blocks = cols / kBlock;
  quantize_blocks_cpu(data, rows, cols, q.tensor_scale, options,
                      [&](int64_t r, int64_t b, const uint8_t* codes, uint8_t scale_byte, float) {
                        uint8_t* packed = codes_out + r * (cols / 2) + b * (kBlock / 2);
                        for (int64_t i = 0; i < kBlock / 2; ++i)
                          packed[i] = pack_e2m1_pair(codes[2 * i], codes[2 * i + 1]);
                        scales_out[r * col_blocks + b] = scale_byte;
                      });
}

template <typename T>
Nvfp4Tensor quantize_cpu(const T* data, int64_t rows, int64_t cols, float tensor_scale,
                         const Nvfp4QuantOptions& options) {
  Nvfp4Tensor q;
  q.rows = rows;
  q.cols = cols;
  q.codes = Tensor::empty({rows, cols / 2}, DType::E2M1x2);
  q.block_scales = Tensor::empty({rows, cols / kBlock}, DType::E4M3);
  quantize_cpu_into(data, tensor_scale, options, q);
  return q;
}

template <typename T, typename Out>
void fake_quantize_cpu(const T* data, Out* out, int64_t rows, int64_t cols, float tensor_scale,
                       const Nvfp4QuantOptions& options) {
  quantize_blocks_cpu(data, rows, cols, tensor_scale, options,
                      [&](int64_t r, int64_t b, const uint8_t* codes, uint8_t, float denominator) {
                        const int64_t first = r * cols + b * kBlock;
                        for (int64_t k = 0; k < kBlock; ++k) store(out, first + k, nvfp4_decode(codes[k], denominator));
                      });
}

template <typename Out>
void dequantize_cpu(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols, float tensor_scale,
                    Out* out) {
  const int64_t col_blocks = cols / kBlock;
  float code_values[16];
  for (int code = 0; code < 16; ++code) code_values[code] = e2m1_to_float(static_cast<uint8_t>(code));
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < col_blocks; ++b) {
      const float denominator = nvfp4_dequant_scale(scales[r * col_blocks + b], tensor_scale);
      const uint8_t* packed = codes + r * (cols / 2) + b * (kBlock / 2);
      // nvfp4_decode(code, denominator) through a table of the 16 code values (the same products).
      float values[kBlock];
      for (int64_t i = 0; i < kBlock / 2; ++i) {
        values[2 * i] = code_values[e2m1_low_code(packed[i])] * denominator;
        values[2 * i + 1] = code_values[e2m1_high_code(packed[i])] * denominator;
      }
      Out* target = out + r * cols + b * kBlock;
      for (int64_t k = 0; k < kBlock; ++k) store(target, k, values[k]);
    }
  }
}

// Shapes, dtypes, devices and the tensor scale (no scan of the data).
void check_layout(const Nvfp4Tensor& q, const std::string& what) {
  NVFP4LM_CHECK(q.layout == Nvfp4Layout::Rows,
                "{}: this NVFP4 weight is in the CPU decode kernel's interleaved layout, which only the CPU NVFP4 "
                "linear reads (load the model without --cpu-matmul int8)",
                what);
  NVFP4LM_CHECK(q.rows > 0 && q.cols > 0 && q.cols % kBlock == 0,
                "{}: NVFP4 weight of [{}, {}]; rows must be positive and cols a positive multiple of 16", what, q.rows,
                q.cols);
  NVFP4LM_CHECK(q.codes.defined() && q.codes.rank() == 2 && q.codes.dim(0) == q.rows && q.codes.dim(1) == q.cols / 2 &&
                    (q.codes.dtype() == DType::E2M1x2 || q.codes.dtype() == DType::U8),
                "{}: NVFP4 codes are {}, expected E2M1x2 (or U8) [{}, {}] (two 4-bit codes per byte)", what,
                q.codes.str(), q.rows, q.cols / 2);
  NVFP4LM_CHECK(q.block_scales.defined() && q.block_scales.rank() == 2 && q.block_scales.dim(0) == q.rows &&
                    q.block_scales.dim(1) == q.cols / kBlock && q.block_scales.dtype() == DType::E4M3,
                "{}: NVFP4 block scales are {}, expected E4M3 [{}, {}] (one per 16 elements of a row)", what,
                q.block_scales.str(), q.rows, q.cols / kBlock);
  NVFP4LM_CHECK(q.codes.device() == q.block_scales.device(), "{}: NVFP4 codes are on {} but block scales on {}", what,
                q.codes.device().str(), q.block_scales.device().str());
  NVFP4LM_CHECK(q.codes.is_contiguous() && q.block_scales.is_contiguous(),
                "{}: NVFP4 codes and block scales must be contiguous", what);
  NVFP4LM_CHECK(std::isfinite(q.tensor_scale) && q.tensor_scale > 0.0f,
                "{}: NVFP4 tensor scale is {}, expected a finite positive number", what, q.tensor_scale);
}

#if NVFP4LM_HAS_CUDA
// ---- CUDA: argument handling and errors here, kernels in cuda/nvfp4.cu --------------------------------------

// The quantize kernels' grid takes at most 65535 column groups of 128.
void check_cuda_columns(const Tensor& weight, const char* what) {
  NVFP4LM_CHECK(weight.dim(1) <= int64_t{65535} * 128, "{}: {} columns are more than the CUDA NVFP4 kernels handle",
                what, weight.dim(1));
}

cuda::Nvfp4KernelOptions kernel_options(const Nvfp4QuantOptions& options, float tensor_scale) {
  cuda::Nvfp4KernelOptions kernel;
  kernel.tensor_scale = tensor_scale;
  kernel.tile = options.block == Nvfp4Block::Tile16x16;
  kernel.stochastic = options.rounding == Rounding::Stochastic;
  kernel.seed = options.seed;
  return kernel;
}

Nvfp4Tensor quantize_cuda(const Tensor& weight, const Nvfp4QuantOptions& options, const char* what) {
  check_cuda_columns(weight, what);
  Nvfp4Tensor q;
  q.rows = weight.dim(0);
  q.cols = weight.dim(1);
  q.tensor_scale = chosen_tensor_scale(options, tensor_amax(weight, what));
  q.codes = Tensor::empty({q.rows, q.cols / 2}, DType::E2M1x2, weight.device());
  q.block_scales = Tensor::empty({q.rows, q.cols / kBlock}, DType::E4M3, weight.device());
  cuda::nvfp4_quantize(weight.raw(), weight.dtype() == DType::BF16, q.rows, q.cols,
                       kernel_options(options, q.tensor_scale), static_cast<uint8_t*>(q.codes.raw()),
                       static_cast<uint8_t*>(q.block_scales.raw()));
  return q;
}

void fake_quantize_cuda(const Tensor& weight, Tensor& out, const Nvfp4QuantOptions& options, const char* what) {
  check_cuda_columns(weight, what);
  const float tensor_scale = chosen_tensor_scale(options, tensor_amax(weight, what));
  cuda::nvfp4_fake_quantize(weight.raw(), weight.dtype() == DType::BF16, weight.dim(0), weight.dim(1),
                            kernel_options(options, tensor_scale), out.raw(), out.dtype() == DType::BF16);
}
#endif

}  // namespace

float nvfp4_tensor_scale(float amax) { return nvfp4_tensor_scale_of(amax); }

bool nvfp4_shape_fits(const Shape& shape, Nvfp4Block block) {
  return shape.rank() == 2 && shape[1] % kBlock == 0 && shape[0] % rows_per_block(block) == 0;
}

Nvfp4Tensor quantize_nvfp4(const Tensor& weight, const Nvfp4QuantOptions& options, const char* what) {
  check_weight(weight, options, what);
  if (weight.device().is_cuda()) {
#if NVFP4LM_HAS_CUDA
    return quantize_cuda(weight, options, what);
#else
    NVFP4LM_FAIL("{}: tensor is on {} but this build has no CUDA", what, weight.device().str());
#endif
  }
  const Tensor input = weight.contiguous();
  const int64_t rows = input.dim(0), cols = input.dim(1);
  const float tensor_scale = chosen_tensor_scale(options, tensor_amax(input, what));
  if (input.dtype() == DType::F32) return quantize_cpu(input.data<float>(), rows, cols, tensor_scale, options);
  return quantize_cpu(input.data<uint16_t>(), rows, cols, tensor_scale, options);
}

void dequantize_nvfp4(const Nvfp4Tensor& q, Tensor& out) {
  check_layout(q, "dequantize_nvfp4");
  check_output(out, q.rows, q.cols, q.device(), "dequantize_nvfp4");
  if (q.device().is_cuda()) {
#if NVFP4LM_HAS_CUDA
    cuda::nvfp4_dequantize(static_cast<const uint8_t*>(q.codes.raw()),
                           static_cast<const uint8_t*>(q.block_scales.raw()), q.rows, q.cols, q.tensor_scale, out.raw(),
                           out.dtype() == DType::BF16);
    return;
#else
    NVFP4LM_FAIL("dequantize_nvfp4: tensor is on {} but this build has no CUDA", q.device().str());
#endif
  }
  const uint8_t* codes = static_cast<const uint8_t*>(q.codes.raw());
  const uint8_t* scales = static_cast<const uint8_t*>(q.block_scales.raw());
  if (out.dtype() == DType::F32)
    dequantize_cpu(codes, scales, q.rows, q.cols, q.tensor_scale, out.data<float>());
  else
    dequantize_cpu(codes, scales, q.rows, q.cols, q.tensor_scale, out.data<uint16_t>());
}

Tensor dequantize_nvfp4(const Nvfp4Tensor& q, DType dtype) {
  check_layout(q, "dequantize_nvfp4");
  Tensor out = Tensor::empty({q.rows, q.cols}, dtype, q.device());
  dequantize_nvfp4(q, out);
  return out;
}

void fake_quantize_nvfp4(const Tensor& weight, Tensor& out, const Nvfp4QuantOptions& options, const char* what) {
  check_weight(weight, options, what);
  check_output(out, weight.dim(0), weight.dim(1), weight.device(), what);
  if (weight.device().is_cuda()) {
#if NVFP4LM_HAS_CUDA
    fake_quantize_cuda(weight, out, options, what);
    return;
#else
    NVFP4LM_FAIL("{}: tensor is on {} but this build has no CUDA", what, weight.device().str());
#endif
  }
  const Tensor input = weight.contiguous();
  const int64_t rows = input.dim(0), cols = input.dim(1);
  const float s = chosen_tensor_scale(options, tensor_amax(input, what));
  const bool f32_in = input.dtype() == DType::F32, f32_out = out.dtype() == DType::F32;
  if (f32_in && f32_out) fake_quantize_cpu(input.data<float>(), out.data<float>(), rows, cols, s, options);
  if (f32_in && !f32_out) fake_quantize_cpu(input.data<float>(), out.data<uint16_t>(), rows, cols, s, options);
  if (!f32_in && f32_out) fake_quantize_cpu(input.data<uint16_t>(), out.data<float>(), rows, cols, s, options);
  if (!f32_in && !f32_out) fake_quantize_cpu(input.data<uint16_t>(), out.data<uint16_t>(), rows, cols, s, options);
}

namespace {

void check_static_input(const Tensor& x, float tensor_scale, const char* what) {
  NVFP4LM_ASSERT(x.defined() && x.rank() == 2 && x.is_contiguous() &&
                     (x.dtype() == DType::F32 || x.dtype() == DType::BF16) && x.dim(1) % kBlock == 0,
                 "{}: x must be a contiguous F32 / BF16 [rows, 16k] matrix, got {}", what,
                 x.defined() ? x.str() : "nothing");
  NVFP4LM_ASSERT(std::isfinite(tensor_scale) && tensor_scale > 0.0f, "{}: tensor scale {} must be finite and positive",
                 what, tensor_scale);
}

}  // namespace

void quantize_nvfp4_static(const Tensor& x, float tensor_scale, Nvfp4Tensor& out) {
  check_static_input(x, tensor_scale, "quantize_nvfp4_static");
  const int64_t rows = x.dim(0), cols = x.dim(1);
  NVFP4LM_ASSERT(out.codes.defined() && out.codes.numel() == rows * cols / 2 && out.codes.is_contiguous() &&
                     out.block_scales.defined() && out.block_scales.numel() == rows * cols / kBlock &&
                     out.block_scales.is_contiguous() && out.codes.device() == x.device() &&
                     out.block_scales.device() == x.device() && out.layout == Nvfp4Layout::Rows,
                 "quantize_nvfp4_static: out must hold [{}, {}] codes and scales on {}", rows, cols, x.device().str());
  out.rows = rows;
  out.cols = cols;
  if (x.device().is_cuda()) {
#if NVFP4LM_HAS_CUDA
    out.tensor_scale = tensor_scale;
    cuda::nvfp4_quantize(x.raw(), x.dtype() == DType::BF16, rows, cols, kernel_options({}, tensor_scale),
                         static_cast<uint8_t*>(out.codes.raw()), static_cast<uint8_t*>(out.block_scales.raw()));
    return;
#else
    NVFP4LM_FAIL("quantize_nvfp4_static: tensor is on {} but this build has no CUDA", x.device().str());
#endif
  }
  if (x.dtype() == DType::F32)
    quantize_cpu_into(x.data<float>(), tensor_scale, {}, out);
  else
    quantize_cpu_into(x.data<uint16_t>(), tensor_scale, {}, out);
}

Tensor unpack_e2m1_codes(const Tensor& packed) {
  NVFP4LM_CHECK(packed.defined() && packed.rank() == 2 && packed.device().is_cpu() &&
                    (packed.dtype() == DType::E2M1x2 || packed.dtype() == DType::U8),
                "unpack_e2m1_codes: expected CPU E2M1x2 or U8 [rows, cols/2], got {}", packed.str());
  const Tensor input = packed.contiguous();
  Tensor codes = Tensor::empty({input.dim(0), input.dim(1) * 2}, DType::U8);
  const uint8_t* src = static_cast<const uint8_t*>(input.raw());
  uint8_t* dst = codes.data<uint8_t>();
  for (int64_t i = 0; i < input.numel(); ++i) {
    dst[2 * i] = e2m1_low_code(src[i]);
    dst[2 * i + 1] = e2m1_high_code(src[i]);
  }
  return codes;
}

Tensor pack_e2m1_codes(const Tensor& codes) {
  NVFP4LM_CHECK(codes.defined() && codes.rank() == 2 && codes.device().is_cpu() && codes.dtype() == DType::U8 &&
                    codes.dim(1) % 2 == 0,
                "pack_e2m1_codes: expected CPU U8 [rows, cols] with even cols, got {}", codes.str());
  const Tensor input = codes.contiguous();
  Tensor packed = Tensor::empty({input.dim(0), input.dim(1) / 2}, DType::E2M1x2);
  const uint8_t* src = input.data<uint8_t>();
  uint8_t* dst = static_cast<uint8_t*>(packed.raw());
  for (int64_t i = 0; i < packed.numel(); ++i) {
    NVFP4LM_CHECK(src[2 * i] < 16 && src[2 * i + 1] < 16, "pack_e2m1_codes: element {} is not a 4-bit code ({}, {})",
                  2 * i, src[2 * i], src[2 * i + 1]);
    dst[i] = pack_e2m1_pair(src[2 * i], src[2 * i + 1]);
  }
  return packed;
}

void validate_nvfp4(const Nvfp4Tensor& q, const std::string& what) {
  check_layout(q, what);
  if (!q.block_scales.device().is_cpu()) return;
  const uint8_t* scales = static_cast<const uint8_t*>(q.block_scales.raw());
  const int64_t col_blocks = q.cols / kBlock;
  for (int64_t i = 0; i < q.block_scales.numel(); ++i) {
    NVFP4LM_CHECK((scales[i] & 0x7F) != kE4M3NaN,
                  "{}: NVFP4 block scale at row {}, block {} is NaN (byte 0x{:02X}); the file is corrupt", what,
                  i / col_blocks, i % col_blocks, scales[i]);
  }
}

}  // namespace nvfp4lm
