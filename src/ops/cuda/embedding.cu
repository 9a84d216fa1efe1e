// CUDA embedding gather / scatter-add (see embedding.h).
#include <algorithm>
#include <numeric>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "ops/cuda/embedding.h"
#include "ops/cuda/input_errors.h"
#include "ops/cuda/kernel_common.cuh"

namespace nvfp4lm::cuda {
namespace {

using namespace kernels;

constexpr int kThreads = 256;

template <typename Src, typename Dst>
__global__ void gather_rows_kernel(const int32_t* ids, DeviceRows table, DeviceRows out, int64_t chunks_per_row,
                                   int64_t items, bool vec, unsigned long long* error_slot) {
  for (int64_t item = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; item < items;
       item += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const ChunkPosition p = chunk_position(item, chunks_per_row);
    const int32_t id = ids[p.row];
    float v[kChunk];
    if (id >= 0 && id < table.count) {
      load_chunk(row_ptr<const Src>(table, id), p.col, out.width, vec, v);
    } else {
#pragma unroll
      for (int k = 0; k < kChunk; ++k) v[k] = 0.f;
      if (p.col == 0) record_input_error(error_slot, p.row, id);
    }
    store_chunk(row_ptr<Dst>(out, p.row), p.col, out.width, vec, v);
  }
}

// One block per distinct id u: dtable[unique_ids[u]] += sum of dout rows positions[offsets[u] .. offsets[u+1]).
template <typename T>
__global__ void embedding_backward_kernel(const int32_t* unique_ids, const int32_t* offsets, const int32_t* positions,
                                          DeviceRows dout, DeviceRows dtable, bool vec) {
  const int64_t width = dtable.width;
  float* target = row_ptr<float>(dtable, unique_ids[blockIdx.x]);
  const int begin = offsets[blockIdx.x], end = offsets[blockIdx.x + 1];
  for (int64_t col = int64_t{threadIdx.x} * kChunk; col < width; col += int64_t{blockDim.x} * kChunk) {
    float acc[kChunk];
    load_chunk(target, col, width, vec, acc);
    for (int i = begin; i < end; ++i) {
      float g[kChunk];
      load_chunk(row_ptr<const T>(dout, positions[i]), col, width, vec, g);
#pragma unroll
      for (int k = 0; k < kChunk; ++k) acc[k] += g[k];
    }
    store_chunk(target, col, width, vec, acc);
  }
}

template <typename F>
void with_type(DType dtype, F&& f) {
  if (dtype == DType::F32) {
    f(float{});
  } else if (dtype == DType::BF16) {
    f(bf16{});
  } else {
    fail(cudaErrorInvalidValue, "embedding on a dtype other than F32 / BF16", __FILE__, __LINE__);
  }
}

}  // namespace

void gather_rows(const int32_t* ids, const DeviceRows& table, const DeviceRows& out, unsigned long long* error_slot) {
  const int64_t chunks_per_row = ceil_div(out.width, kChunk), items = out.count * chunks_per_row;
  if (items == 0) return;
  const bool vec = vectorizable(table) && vectorizable(out);
  const unsigned blocks = grid_stride_blocks(items, kThreads);
  with_type(table.dtype, [&](auto src_tag) {
    with_type(out.dtype, [&](auto dst_tag) {
      using Src = decltype(src_tag);
      using Dst = decltype(dst_tag);
      NVFP4LM_LAUNCH((gather_rows_kernel<Src, Dst>), blocks, kThreads, 0)
      (ids, table, out, chunks_per_row, items, vec, error_slot);
    });
  });
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

void embedding_forward(const int32_t* ids, const DeviceRows& table, const DeviceRows& out) {
  gather_rows(ids, table, out, input_error_slot(InputErrorKind::EmbeddingId));
}

size_t embedding_backward_scratch_bytes(int64_t count) { return static_cast<size_t>(3 * count + 1) * sizeof(int32_t); }

void embedding_backward(const int32_t* host_ids, int64_t count, const DeviceRows& dout, const DeviceRows& dtable,
                        void* scratch) {
  if (count == 0 || dtable.width == 0) return;
  // Buckets on the host: positions sorted by id (stable: ascending within an id), the distinct ids, and where
  // each id's positions start. Uploaded as one buffer [unique ids | offsets | positions].
  std::vector<int32_t> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [host_ids](int32_t a, int32_t b) { return host_ids[a] < host_ids[b]; });
  std::vector<int32_t> unique_ids, offsets;
  for (int64_t i = 0; i < count; ++i) {
    const int32_t id = host_ids[order[static_cast<size_t>(i)]];
    if (unique_ids.empty() || unique_ids.back() != id) {
      unique_ids.push_back(id);
      offsets.push_back(static_cast<int32_t>(i));
    }
  }
  offsets.push_back(static_cast<int32_t>(count));
  const size_t distinct = unique_ids.size();
  std::vector<int32_t> packed;
  packed.reserve(2 * distinct + 1 + order.size());
  packed.insert(packed.end(), unique_ids.begin(), unique_ids.end());
  packed.insert(packed.end(), offsets.begin(), offsets.end());
  packed.insert(packed.end(), order.begin(), order.end());
  copy(scratch, true, packed.data(), false, packed.size() * sizeof(int32_t));
  const auto* device = static_cast<const int32_t*>(scratch);

  const bool vec = vectorizable(dout) && vectorizable(dtable);
  const int threads = static_cast<int>(std::clamp<int64_t>(ceil_div(ceil_div(dtable.width, kChunk), 32) * 32, 32, 256));
  with_type(dout.dtype, [&](auto tag) {
    using T = decltype(tag);
    NVFP4LM_LAUNCH(embedding_backward_kernel<T>, static_cast<unsigned>(distinct), threads, 0)
    (device, device + distinct, device + 2 * distinct + 1, dout, dtable, vec);
  });
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

}  // namespace nvfp4lm::cuda
