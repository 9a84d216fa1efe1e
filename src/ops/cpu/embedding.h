// CPU reference of ops/embedding.h.
#pragma once

#include "core/tensor.h"

namespace nvfp4lm::cpu {

void embedding_forward(const Tensor& ids, const Tensor& table, Tensor& out);
void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable);

}  // namespace nvfp4lm::cpu
