// Shape checks and device dispatch for ops/embedding.h.
#include "ops/embedding.h"

#include "ops/cpu/embedding.h"
#include "ops/dispatch.h"

#if NVFP4LM_HAS_CUDA
#include "ops/cuda/embedding.h"
#include "ops/cuda/input_errors.h"
#include "ops/cuda/tensor_rows.h"
#endif

namespace nvfp4lm {
namespace {

void check_shapes(const char* op, const Tensor& ids, const Tensor& table, const Tensor& rows) {
  NVFP4LM_ASSERT(ids.dtype() == DType::I32, "{}: ids must be I32, got {}", op, ids.str());
  NVFP4LM_ASSERT(table.rank() == 2, "{}: table must be [V, H], got {}", op, table.str());
  NVFP4LM_ASSERT(rows.rank() >= 1 && rows.dim(-1) == table.dim(1) && rows.numel() == ids.numel() * table.dim(1),
                 "{}: {} does not hold one row of {} per id of {}", op, rows.str(), table.dim(1), ids.str());
}

#if NVFP4LM_HAS_CUDA
void check_cuda_dtypes(const char* op, const Tensor& table, const Tensor& rows) {
  NVFP4LM_ASSERT((table.dtype() == DType::F32 || table.dtype() == DType::BF16) &&
                     (rows.dtype() == DType::F32 || rows.dtype() == DType::BF16),
                 "{} on CUDA: table {} and rows {} must be F32 or BF16", op, table.str(), rows.str());
}
#endif

}  // namespace

void embedding_forward(const Tensor& ids, const Tensor& table, Tensor& out) {
  check_shapes("embedding_forward", ids, table, out);
  [[maybe_unused]] const Device device = common_device("embedding_forward", {&ids, &table, &out});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) {
    // Ids are checked by the kernel, reported here at the next call (ops/cuda/embedding.h).
    cuda::throw_pending_input_errors();
    check_cuda_dtypes("embedding_forward", table, out);
    cuda::set_input_error_limit(cuda::InputErrorKind::EmbeddingId, table.dim(0));
    cuda::embedding_forward(cuda::device_int32(ids, "embedding_forward ids"),
                            cuda::device_matrix(table, "embedding_forward table"),
                            cuda::device_rows(out, 1, "embedding_forward out"));
    return;
  }
#endif
  cpu::embedding_forward(ids, table, out);
}

void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable) {
  check_shapes("embedding_backward", ids, dtable, dout);
  [[maybe_unused]] const Device device = common_device("embedding_backward", {&ids, &dout, &dtable});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) {
    check_cuda_dtypes("embedding_backward", dtable, dout);
    NVFP4LM_ASSERT(dtable.dtype() == DType::F32, "embedding_backward on CUDA: dtable {} must be F32", dtable.str());
    (void)cuda::device_int32(ids, "embedding_backward ids");
    // The kernel buckets the ids on the host (deterministic sums), so they come over here and are checked first.
    const Tensor host_ids = ids.to(Device::cpu());
    cuda::throw_pending_input_errors();
    const int32_t* id = ids.numel() > 0 ? host_ids.data<int32_t>() : nullptr;
    for (int64_t i = 0; i < ids.numel(); ++i) {
      NVFP4LM_CHECK(id[i] >= 0 && id[i] < dtable.dim(0),
                    "embedding_backward: token id {} at position {} is outside the vocabulary [0, {}) (the data or "
                    "tokenizer does not match the model)",
                    id[i], i, dtable.dim(0));
    }
    if (ids.numel() == 0) return;
    Tensor scratch =
        Tensor::empty({static_cast<int64_t>(cuda::embedding_backward_scratch_bytes(ids.numel()))}, DType::U8, device);
    cuda::embedding_backward(id, ids.numel(), cuda::device_rows(dout, 1, "embedding_backward dout"),
                             cuda::device_matrix(dtable, "embedding_backward dtable"), scratch.raw());
    return;
  }
#endif
  cpu::embedding_backward(ids, dout, dtable);
}

}  // namespace nvfp4lm
