// Shape checks and device dispatch for ops/embedding.h.
#include "ops/embedding.h"

#include "ops/cpu/embedding.h"
#include "ops/dispatch.h"

namespace nvfp4lm {
namespace {

void check_shapes(const char* op, const Tensor& ids, const Tensor& table, const Tensor& rows) {
  NVFP4LM_ASSERT(ids.dtype() == DType::I32, "{}: ids must be I32, got {}", op, ids.str());
  NVFP4LM_ASSERT(table.rank() == 2, "{}: table must be [V, H], got {}", op, table.str());
  NVFP4LM_ASSERT(rows.rank() >= 1 && rows.dim(-1) == table.dim(1) && rows.numel() == ids.numel() * table.dim(1),
                 "{}: {} does not hold one row of {} per id of {}", op, rows.str(), table.dim(1), ids.str());
}

}  // namespace

void embedding_forward(const Tensor& ids, const Tensor& table, Tensor& out) {
  check_shapes("embedding_forward", ids, table, out);
  [[maybe_unused]] const Device device = common_device("embedding_forward", {&ids, &table, &out});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) no_cuda_implementation("embedding_forward");  // -> cuda::embedding_forward(...); return;
#endif
  cpu::embedding_forward(ids, table, out);
}

void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable) {
  check_shapes("embedding_backward", ids, dtable, dout);
  [[maybe_unused]] const Device device = common_device("embedding_backward", {&ids, &dout, &dtable});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) no_cuda_implementation("embedding_backward");  // -> cuda::embedding_backward(...); return;
#endif
  cpu::embedding_backward(ids, dout, dtable);
}

}  // namespace nvfp4lm
