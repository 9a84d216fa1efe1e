// CPU attention, exact (two-pass softmax over each query's whole key range) in fp32, tiled:
//  - A tile is a block of up to kQueryBlock queries times the q heads of one GQA group (the heads that share
//    a kv head): its rows are (query, head) pairs, so each key / value row is read once per tile rather than
//    once per head. Scores come from tile::dot_block over blocks of 16 keys, probabilities from a vectorised
//    exp, and the products with V (and, backward, with K, Q, dout) from tile::accumulate_rows.
//  - Forward: tasks are (batch, kv head, query block), scheduled dynamically, longest causal rows first.
//  - Backward: tasks are (batch, kv head), so each task owns its dk / dv rows (no races, no atomics). Per row,
//    with p = the softmax row and dp_s = dout·v_s:
//      ds_s = p_s (dp_s - sum_r p_r dp_r),  dq = scale ds K,  dk += scale dsᵀ q,  dv += pᵀ dout.
//  - The mask: query t sees keys [lo(t), q_start + t]; with segments lo(t) is the first key of t's segment id
//    and keys in the range with another id are masked too. A tile computes scores for the union of its rows'
//    ranges and masks per row, so packed rows do little work across samples.
//  - Keys and values inside a tile's range must be finite even where masked (masked probabilities are 0, and
//    0 * NaN would leak): true for any row of the current sequence.
#include "ops/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <unordered_map>
#include <vector>

#include "ops/cpu/tile_kernels.h"
#include "ops/cpu/vector_math.h"
#include "ops/cpu/views.h"
#include "ops/cpu/x86/levels.h"

namespace nvfp4lm::cpu {
namespace {

constexpr int64_t kQueryBlock = 32;
using tile::kKeys;
constexpr float kMasked = -std::numeric_limits<float>::infinity();

// A [B, T, H, D] F32 tensor with free batch / token strides and contiguous [H, D] per token.
struct HeadsF32 {
  float* base = nullptr;
  int64_t batch_stride = 0, token_stride = 0, len = 0, heads = 0, dim = 0;

  HeadsF32() = default;
  HeadsF32(const Tensor& t, const char* what) {
    const RowsF32 tokens(t, 2, what);  // asserts CPU, F32 and [H, D] contiguity
    base = tokens.data();
    batch_stride = t.stride(0);
    token_stride = t.stride(1);
    len = t.dim(1);
    heads = t.dim(2);
    dim = t.dim(3);
  }
  float* at(int64_t b, int64_t t, int64_t h) const { return base + b * batch_stride + t * token_stride + h * dim; }
};

// The mask: which keys each query sees.
class KeyRanges {
 public:
  KeyRanges(const AttentionOptions& options, int64_t batch, int64_t q_len) : q_start_(options.q_start), q_len_(q_len) {
    if (options.segment_ids == nullptr) return;
    segments_ = int32_data(*options.segment_ids, "attention segment_ids");
    first_.resize(static_cast<size_t>(batch * q_len));
    for (int64_t b = 0; b < batch; ++b) {
      std::unordered_map<int32_t, int64_t> first_of_segment;
      for (int64_t t = 0; t < q_len; ++t) {
        auto [it, inserted] = first_of_segment.try_emplace(segments_[b * q_len + t], t);
        first_[static_cast<size_t>(b * q_len + t)] = it->second;
      }
    }
  }
  int64_t lo(int64_t b, int64_t t) const { return segments_ ? first_[static_cast<size_t>(b * q_len_ + t)] : 0; }
  int64_t hi(int64_t t) const { return q_start_ + t; }  // inclusive
  bool has_segments() const { return segments_ != nullptr; }
  bool visible(int64_t b, int64_t t, int64_t s) const {
    return segments_ == nullptr || segments_[b * q_len_ + s] == segments_[b * q_len_ + t];
  }

 private:
  int64_t q_start_;
  int64_t q_len_;
  const int32_t* segments_ = nullptr;
  std::vector<int64_t> first_;
};

// Everything a task reads or writes.
struct Problem {
  HeadsF32 q, k, v, out, dout, dq, dk, dv;
  float* lse_out = nullptr;
  const float* lse_in = nullptr;
  int64_t q_len = 0, k_len = 0, q_heads = 0, group = 0, dim = 0;
  float scale = 0.f;

  // The sizes, once q/k/v are set: q [B, Tq, Hq, D], k [B, Tk, Hkv, D].
  void set_sizes(const AttentionOptions& options) {
    q_len = q.len;
    k_len = k.len;
    q_heads = q.heads;
    group = q_heads / k.heads;
    dim = q.dim;
    scale = options.scale;
  }
  // Multiply-adds of the scores, to decide whether threads pay off.
  double work(int64_t batch) const {
    return static_cast<double>(batch * q_heads * q_len) * static_cast<double>(k_len * dim);
  }
};

inline int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// Uninitialised scratch (a value-initialised std::vector would clear megabytes per call when decoding against
// a long KV cache).
template <typename T>
std::unique_ptr<T[]> scratch(int64_t count) {
  return std::unique_ptr<T[]>(new T[static_cast<size_t>(std::max<int64_t>(count, 1))]);
}

// Per-thread scratch for one tile: rows are (query, head) pairs, columns the tile's keys (padded to 16).
struct AttentionTile {
  int64_t rows = 0, t_begin = 0, lo = 0, keys = 0, stride = 0;  // stride: padded key count, a multiple of 16
  std::unique_ptr<const float*[]> q_rows, dout_rows, k_rows, v_rows;
  std::unique_ptr<float*[]> out_rows, dk_rows, dv_rows;
  std::unique_ptr<float[]> transposed, scores, dscores, acc, row_max, row_sum;
  std::vector<float> zero_row;

  // Room for tiles of up to `max_queries` queries of `group` heads over up to `k_len` keys.
  AttentionTile(int64_t group, int64_t max_queries, int64_t k_len, int64_t dim, bool backward) {
    const int64_t max_rows = group * max_queries, max_keys = round_up(k_len, kKeys);
    q_rows = scratch<const float*>(max_rows);
    out_rows = scratch<float*>(max_rows);
    k_rows = scratch<const float*>(max_keys);
    v_rows = scratch<const float*>(max_keys);
    transposed = scratch<float>(dim * kKeys);
    scores = scratch<float>(max_rows * max_keys);
    acc = scratch<float>(max_rows * dim);
    row_max = scratch<float>(max_rows);
    row_sum = scratch<float>(max_rows);
    zero_row.assign(static_cast<size_t>(dim), 0.f);
    if (backward) {
      dout_rows = scratch<const float*>(max_rows);
      dk_rows = scratch<float*>(max_keys);
      dv_rows = scratch<float*>(max_keys);
      dscores = scratch<float>(max_rows * max_keys);
    }
  }

  float* score_row(int64_t r) { return scores.get() + r * stride; }
  float* dscore_row(int64_t r) { return dscores.get() + r * stride; }
};

// Sets up the tile of queries [t_begin, t_end) x the group of kv head `kv_head`: row pointers, key range.
void begin_tile(const Problem& pb, const KeyRanges& ranges, int64_t b, int64_t kv_head, int64_t t_begin, int64_t t_end,
                bool backward, AttentionTile& tile) {
  const int64_t group = pb.group, h0 = kv_head * group;
  tile.t_begin = t_begin;
  tile.rows = (t_end - t_begin) * group;
  tile.lo = ranges.lo(b, t_begin);
  for (int64_t t = t_begin; t < t_end; ++t) tile.lo = std::min(tile.lo, ranges.lo(b, t));
  tile.keys = ranges.hi(t_end - 1) - tile.lo + 1;
  tile.stride = round_up(tile.keys, kKeys);
  for (int64_t t = t_begin; t < t_end; ++t) {
    for (int64_t g = 0; g < group; ++g) {
      const auto r = static_cast<size_t>((t - t_begin) * group + g);
      tile.q_rows[r] = pb.q.at(b, t, h0 + g);
      if (backward) tile.dout_rows[r] = pb.dout.at(b, t, h0 + g);
    }
  }
  for (int64_t j = 0; j < tile.stride; ++j) {
    const bool real = j < tile.keys;
    tile.k_rows[j] = real ? pb.k.at(b, tile.lo + j, kv_head) : tile.zero_row.data();
    tile.v_rows[j] = real ? pb.v.at(b, tile.lo + j, kv_head) : tile.zero_row.data();
  }
}

// out[r][j] = scale * a_r · keys_j for the tile's rows and keys (keys given by row pointers).
[[gnu::always_inline]] inline void tile_dots(AttentionTile& tile, const float* const* a, const float* const* keys,
                                             int64_t dim, float scale, float* out) {
  for (int64_t j0 = 0; j0 < tile.stride; j0 += kKeys) {
    tile::transpose_block(keys + j0, std::min(kKeys, tile.keys - j0), dim, tile.transposed.get());
    tile::dot_block(a, tile.rows, tile.transposed.get(), dim, scale, out + j0, tile.stride);
  }
}

// Sets hidden (row, key) scores to -inf: keys after the row's query, padding, other segments.
void mask_tile(const KeyRanges& ranges, int64_t b, int64_t group, AttentionTile& tile) {
  for (int64_t r = 0; r < tile.rows; ++r) {
    const int64_t t = tile.t_begin + r / group;
    float* row = tile.score_row(r);
    const int64_t last = ranges.hi(t) - tile.lo;  // last visible column
    for (int64_t j = last + 1; j < tile.stride; ++j) row[j] = kMasked;
    if (ranges.has_segments()) {
      for (int64_t j = 0; j <= last; ++j) {
        if (!ranges.visible(b, t, tile.lo + j)) row[j] = kMasked;
      }
    }
  }
}

// Forward of one tile: queries [t_begin, t_end) of every q head of kv head `kv_head` in batch row b.
[[gnu::always_inline]] inline void forward_task(const Problem& pb, const KeyRanges& ranges, int64_t b, int64_t kv_head,
                                                int64_t t_begin, int64_t t_end, AttentionTile& tile) {
  const int64_t group = pb.group, dim = pb.dim, h0 = kv_head * group;
  begin_tile(pb, ranges, b, kv_head, t_begin, t_end, false, tile);
  tile_dots(tile, tile.q_rows.get(), tile.k_rows.get(), dim, pb.scale, tile.scores.get());
  mask_tile(ranges, b, group, tile);
  // Softmax numerators in place (the max makes exp safe; masked entries become 0).
  for (int64_t r = 0; r < tile.rows; ++r) {
    float* row = tile.score_row(r);
    const int64_t n = tile.stride;
    float m = kMasked;
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < n; ++j) m = std::max(m, row[j]);
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j) {
      row[j] = exp_vectorizable(row[j] - m);
      sum += row[j];
    }
    tile.row_max[r] = m;
    tile.row_sum[r] = sum;
  }
  // out = p V, normalised.
  std::fill_n(tile.acc.get(), tile.rows * dim, 0.f);
  for (int64_t r = 0; r < tile.rows; ++r) tile.out_rows[r] = tile.acc.get() + r * dim;
  tile::accumulate_rows(tile.out_rows.get(), tile.rows, tile.scores.get(), tile.stride, 1, tile.v_rows.get(), tile.keys,
                        dim);
  for (int64_t r = 0; r < tile.rows; ++r) {
    const int64_t t = t_begin + r / group, h = h0 + r % group;
    const float inv_sum = 1.f / tile.row_sum[r];
    const float* acc = tile.acc.get() + r * dim;
    float* o = pb.out.at(b, t, h);
#pragma omp simd
    for (int64_t i = 0; i < dim; ++i) o[i] = acc[i] * inv_sum;
    if (pb.lse_out != nullptr) {
      pb.lse_out[(b * pb.q_heads + h) * pb.q_len + t] = tile.row_max[r] + std::log(tile.row_sum[r]);
    }
  }
}

// Backward of every query of every q head of kv head `kv_head` in batch row b; owns dk / dv of that kv head.
[[gnu::always_inline]] inline void backward_task(const Problem& pb, const KeyRanges& ranges, int64_t b, int64_t kv_head,
                                                 AttentionTile& tile) {
  const int64_t group = pb.group, dim = pb.dim, h0 = kv_head * group;
  for (int64_t s = 0; s < pb.k_len; ++s) {
    std::fill_n(pb.dk.at(b, s, kv_head), dim, 0.f);
    std::fill_n(pb.dv.at(b, s, kv_head), dim, 0.f);
  }
  for (int64_t t_begin = 0; t_begin < pb.q_len; t_begin += kQueryBlock) {
    const int64_t t_end = std::min(pb.q_len, t_begin + kQueryBlock);
    begin_tile(pb, ranges, b, kv_head, t_begin, t_end, true, tile);
    tile_dots(tile, tile.q_rows.get(), tile.k_rows.get(), dim, pb.scale, tile.scores.get());
    tile_dots(tile, tile.dout_rows.get(), tile.v_rows.get(), dim, 1.f, tile.dscores.get());  // dp
    mask_tile(ranges, b, group, tile);
    // p from the forward's lse (or re-normalised here), then ds = scale p (dp - sum p dp), in place.
    for (int64_t r = 0; r < tile.rows; ++r) {
      const int64_t t = t_begin + r / group, h = h0 + r % group;
      float* p = tile.score_row(r);
      float* dp = tile.dscore_row(r);
      const int64_t n = tile.stride;
      float row_lse;
      if (pb.lse_in != nullptr) {
        row_lse = pb.lse_in[(b * pb.q_heads + h) * pb.q_len + t];
      } else {
        float m = kMasked, sum = 0.f;
#pragma omp simd reduction(max : m)
        for (int64_t j = 0; j < n; ++j) m = std::max(m, p[j]);
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < n; ++j) sum += exp_vectorizable(p[j] - m);
        row_lse = m + std::log(sum);
      }
      float delta = 0.f;
#pragma omp simd reduction(+ : delta)
      for (int64_t j = 0; j < n; ++j) {
        p[j] = exp_vectorizable(p[j] - row_lse);
        delta += p[j] * dp[j];
      }
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) dp[j] = pb.scale * p[j] * (dp[j] - delta);
    }
    // dq = ds K (one tile of rows, written once), dk += dsᵀ q, dv += pᵀ dout.
    std::fill_n(tile.acc.get(), tile.rows * dim, 0.f);
    for (int64_t r = 0; r < tile.rows; ++r) tile.out_rows[r] = tile.acc.get() + r * dim;
    tile::accumulate_rows(tile.out_rows.get(), tile.rows, tile.dscores.get(), tile.stride, 1, tile.k_rows.get(),
                          tile.keys, dim);
    for (int64_t r = 0; r < tile.rows; ++r) {
      std::copy_n(tile.acc.get() + r * dim, dim, pb.dq.at(b, t_begin + r / group, h0 + r % group));
    }
    for (int64_t j = 0; j < tile.keys; ++j) {
      tile.dk_rows[j] = pb.dk.at(b, tile.lo + j, kv_head);
      tile.dv_rows[j] = pb.dv.at(b, tile.lo + j, kv_head);
    }
    tile::accumulate_rows(tile.dk_rows.get(), tile.keys, tile.dscores.get(), 1, tile.stride, tile.q_rows.get(),
                          tile.rows, dim);
    tile::accumulate_rows(tile.dv_rows.get(), tile.keys, tile.scores.get(), 1, tile.stride, tile.dout_rows.get(),
                          tile.rows, dim);
  }
}

// The tasks compiled per x86-64 level (ops/cpu/x86/levels.h).
struct AttentionKernels {
  void (*forward)(const Problem&, const KeyRanges&, int64_t, int64_t, int64_t, int64_t, AttentionTile&);
  void (*backward)(const Problem&, const KeyRanges&, int64_t, int64_t, AttentionTile&);
};

const KernelFamily<AttentionKernels>& attention_family() {
  static const KernelFamily<AttentionKernels> family(
      "attention", level_variants<AttentionKernels>([]<KernelLevel L>() {
        return AttentionKernels{kernel_at<forward_task, L>(), kernel_at<backward_task, L>()};
      }));
  return family;
}

}  // namespace

const KernelFamilyInfo& attention_kernel_family() { return attention_family(); }

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, const AttentionOptions& options,
                       Tensor* lse) {
  Problem pb;
  pb.q = HeadsF32(q, "attention_forward q");
  pb.k = HeadsF32(k, "attention_forward k");
  pb.v = HeadsF32(v, "attention_forward v");
  pb.out = HeadsF32(out, "attention_forward out");
  if (lse != nullptr) {
    NVFP4LM_ASSERT(lse->is_contiguous(), "attention_forward: lse {} must be contiguous", lse->str());
    pb.lse_out = RowsF32(*lse, 1, "attention_forward lse").data();
  }
  const int64_t batch = q.dim(0), kv_heads = pb.k.heads;
  pb.set_sizes(options);
  const int64_t blocks = (pb.q_len + kQueryBlock - 1) / kQueryBlock;
  const int64_t tasks = batch * kv_heads * blocks;
  const KeyRanges ranges(options, batch, pb.q_len);
  const double work = pb.work(batch);
  const auto forward_task_variant = attention_family().chosen().kernels.forward;

#pragma omp parallel if (tasks > 1 && work > 65536)
  {
    AttentionTile tile(pb.group, std::min(pb.q_len, kQueryBlock), pb.k_len, pb.dim, /*backward=*/false);
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      // Later query blocks (longer causal rows) first, so the cheap ones fill in at the end.
      const int64_t block = blocks - 1 - task % blocks, kv_head = (task / blocks) % kv_heads;
      const int64_t b = task / (blocks * kv_heads);
      forward_task_variant(pb, ranges, b, kv_head, block * kQueryBlock, std::min(pb.q_len, (block + 1) * kQueryBlock),
                           tile);
    }
  }
}

void attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& lse,
                        const AttentionOptions& options, Tensor& dq, Tensor& dk, Tensor& dv) {
  Problem pb;
  pb.q = HeadsF32(q, "attention_backward q");
  pb.k = HeadsF32(k, "attention_backward k");
  pb.v = HeadsF32(v, "attention_backward v");
  pb.dout = HeadsF32(dout, "attention_backward dout");
  pb.dq = HeadsF32(dq, "attention_backward dq");
  pb.dk = HeadsF32(dk, "attention_backward dk");
  pb.dv = HeadsF32(dv, "attention_backward dv");
  if (lse.defined()) {
    NVFP4LM_ASSERT(lse.is_contiguous(), "attention_backward: lse {} must be contiguous", lse.str());
    pb.lse_in = RowsF32(lse, 1, "attention_backward lse").data();
  }
  const int64_t batch = q.dim(0), kv_heads = pb.k.heads;
  pb.set_sizes(options);
  const int64_t tasks = batch * kv_heads;
  const KeyRanges ranges(options, batch, pb.q_len);
  const double work = pb.work(batch);
  const auto backward_task_variant = attention_family().chosen().kernels.backward;

#pragma omp parallel if (tasks > 1 && work > 32768)
  {
    AttentionTile tile(pb.group, std::min(pb.q_len, kQueryBlock), pb.k_len, pb.dim, /*backward=*/true);
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task)
      backward_task_variant(pb, ranges, task / kv_heads, task % kv_heads, tile);
  }
}

}  // namespace nvfp4lm::cpu
