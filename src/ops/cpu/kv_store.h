// CPU reference of ops/kv_store.h (any dtype: rows are copied as bytes).
#pragma once

#include "core/tensor.h"

namespace nvfp4lm::cpu {

void store_kv_rows(const Tensor& fresh, Tensor& cache, const Tensor& slots);

}  // namespace nvfp4lm::cpu
