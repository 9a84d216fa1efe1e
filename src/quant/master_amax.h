// The largest magnitude of a master weight, computed where the weight lives: the tensor scale of the QAT refresh
// (model/qwen3_trainable.cpp) without copying CUDA masters to the host. CPU tensors take quant/nvfp4_fixed_scale.h's
// weight_amax (the reference); CUDA tensors (F32 or BF16, contiguous, any shape) the quantizer's own amax kernel
// (quant/cuda/nvfp4_cuda.h's nvfp4_amax), which gives the same value (a maximum is exact) and, formatted here, the
// same error for a non-finite element.
#pragma once

#include <string>

#include "core/tensor.h"

namespace nvfp4lm {

// max |x|; Error naming `what`, the row and the column (of the last axis) of the first non-finite element.
float master_weight_amax(const Tensor& master, const std::string& what);

}  // namespace nvfp4lm
