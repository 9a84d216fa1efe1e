// Grid sizes of grid-stride loops: one rule for every kernel that walks its work with
// `for (i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)` (or a block-strided twin).
// The cap keeps the grid legal and is far above what fills a GPU, so on real sizes the loops mostly run once per
// thread; the emulated build can lower it (NVFP4LM_EMU_GRID_CAP, docs/cuda-emulation.md) so that tests of
// ordinary sizes run every such loop several times, where a missing barrier at the loop's end or a per-block
// value carried across iterations shows.
#pragma once

#include <cstdint>

namespace nvfp4lm::cuda {

// The most blocks a grid-stride launch takes unless its launcher asks for fewer (gridDim.x may reach 2^31 - 1).
inline constexpr int64_t kMaxGridStrideBlocks = int64_t{65535} * 16;

// Blocks for a grid-stride loop over `work_items` items of which one block takes `items_per_block` per iteration:
// ceil(work_items / items_per_block), at least 1, at most `max_blocks` and, in the emulated build, at most
// NVFP4LM_EMU_GRID_CAP when it is set.
unsigned grid_stride_blocks(int64_t work_items, int64_t items_per_block, int64_t max_blocks = kMaxGridStrideBlocks);

}  // namespace nvfp4lm::cuda
