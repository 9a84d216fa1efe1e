// See grid_stride.h.
#include "core/cuda/grid_stride.h"

#include <algorithm>

#if NVFP4LM_CUDA_EMULATION
#include "core/cuda/emulation.h"
#endif

namespace nvfp4lm::cuda {

unsigned grid_stride_blocks(int64_t work_items, int64_t items_per_block, int64_t max_blocks) {
  const int64_t per_block = std::max<int64_t>(items_per_block, 1);
  int64_t blocks = std::clamp<int64_t>((work_items + per_block - 1) / per_block, 1, std::max<int64_t>(max_blocks, 1));
#if NVFP4LM_CUDA_EMULATION
  if (const int64_t cap = emulated::grid_stride_cap(); cap > 0) blocks = std::min(blocks, cap);
#endif
  return static_cast<unsigned>(blocks);
}

}  // namespace nvfp4lm::cuda
