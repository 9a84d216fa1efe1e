// The amax of a tensor, max |x|, measured where the tensor lives: the one measurement behind every NVFP4 tensor
// scale (quantize_nvfp4's own, the shared scale of a fused group, quant/nvfp4_group_scale.h) and behind the
// activation ranges of a calibration (model/qwen3_block_forward.cpp). CPU tensors (F32, BF16, F16) are scanned
// here; CUDA tensors (F32, BF16) by the quantizer's amax kernel (quant/cuda/nvfp4_cuda.h nvfp4_amax), which gives
// the same value (a maximum is exact). Any shape: the tensor is read as the matrix [numel / last dim, last dim].
//
// A non-finite element (NaN, +-inf) is an Error with one text wherever it is found (this scan, the CUDA kernel,
// or an optimizer update that measured the amax while writing: quant/master_amax.h):
//   "<what>: non-finite value <value> at row <r>, column <c> of [<rows>, <cols>]"
// naming the first such element by its flat index.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace nvfp4lm {

// max |x| over `tensor` (CPU F32/BF16/F16 or CUDA F32/BF16, any shape, any strides on the CPU, contiguous on CUDA).
float tensor_amax(const Tensor& tensor, const std::string& what);

// The Error for the non-finite element at flat `index` (of the contiguous tensor) whose value is `value`.
[[noreturn]] void fail_non_finite_element(const Tensor& tensor, int64_t index, float value, const std::string& what);

}  // namespace nvfp4lm
