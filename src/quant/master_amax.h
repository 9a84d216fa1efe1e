// UpdatedMasterAmaxes: the amaxes of master weights (quant/tensor_amax.h), measured by an optimizer update while it
// writes the masters (it folds every value it stores into an AmaxAccumulator, quant/amax_accumulator.h), handed to
// the refresh that follows (model/qwen3_trainable.cpp) so that the refresh skips its own pass over those masters.
// Staleness is ruled out by the object's life, not by bookkeeping:
// one object per update, made empty by the caller just before the update, filled by it, read by the refresh right
// after, then dropped; neither the model nor the optimizer keeps it. Masters written any other way (loading a
// checkpoint, building the model, a test) are refreshed without one and measured. Each entry is given out once.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "quant/amax_accumulator.h"

namespace nvfp4lm {

class UpdatedMasterAmaxes {
 public:
  UpdatedMasterAmaxes() = default;
  UpdatedMasterAmaxes(const UpdatedMasterAmaxes&) = delete;  // an entry is given out once
  UpdatedMasterAmaxes& operator=(const UpdatedMasterAmaxes&) = delete;

  // The producer, before it writes `masters` (contiguous, distinct, all on one device): one accumulator per master,
  // in order, each empty (amax 0, no non-finite element), in the masters' memory (device memory for CUDA masters).
  // The update folds every value it stores into its master's accumulator. Once per object.
  AmaxAccumulator* record(std::span<const Tensor> masters);
  size_t recorded() const { return entries_.size(); }  // masters the update measured

  // The consumer: the amax of `master` as the update wrote it, when the update recorded this master (the same
  // memory, dtype and size) and it was not taken before; std::nullopt otherwise, and the caller measures it. Throws
  // tensor_amax's Error (same text, quant/tensor_amax.h) when the update wrote a non-finite value. The first call reads
  // every accumulator back at once (one synchronization for a CUDA update).
  std::optional<float> take(const Tensor& master, const std::string& what);
  size_t taken() const { return taken_; }  // how many amaxes were given out (the passes the refresh skipped)

 private:
  struct Entry {
    int64_t numel = 0;
    DType dtype = DType::F32;
    bool taken = false;
  };
  std::unordered_map<const void*, size_t> index_by_data_;
  std::vector<Entry> entries_;
  Tensor accumulators_;                     // U8 [entries * 16] where the masters are
  std::vector<AmaxAccumulator> read_back_;  // filled by the first take()
  size_t taken_ = 0;
};

}  // namespace nvfp4lm
