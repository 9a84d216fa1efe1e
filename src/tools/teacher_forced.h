// The logits of one fixed token sequence through one inference path (teacher forcing: the path is fed the given
// ids, never its own choices), so that two paths' logits line up position by position (tools/parity.h).
//   Full:        one causal forward over the whole sequence, no cache;
//   Cached:      a KV cache: the first prompt_tokens ids in one forward_cached call (logits of every one of them),
//                then one forward_cached call per remaining id — what generation does on the CPU (there the single
//                rows take the fused NVFP4 row kernel);
//   CachedEager: the same prefill, then Qwen3DecodeStep in Eager mode (the CUDA decode step run op by op);
//   CachedGraph: ... in Graph mode (the step captured once as a CUDA graph and replayed; CUDA only).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/tensor.h"
#include "model/qwen3_model.h"

namespace nvfp4lm {

enum class SequenceRunner { Full, Cached, CachedEager, CachedGraph };

// The logits F32 [T, V] of ids (T tokens; 1 <= prompt_tokens <= T) handed to `sink` in order, a block of rows at a
// time (F32 [rows, V] on the CPU whose first row is position `row`): the full forward or the prefill is one block, each
// later token one row. A caller that compares and drops them holds one block, not [T, V] (parity: a 1,000-token prompt
// is 608 MB of logits at Qwen3's vocabulary).
using LogitRowSink = std::function<void(int64_t row, const Tensor& rows)>;
void teacher_forced_logits(const Qwen3Model& model, SequenceRunner runner, const std::vector<int32_t>& ids,
                           int64_t prompt_tokens, const LogitRowSink& sink);

}  // namespace nvfp4lm
