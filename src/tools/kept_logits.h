// The logits a `parity` path keeps for a later path to be judged against (tools/parity.h), written and compared a
// block of rows at a time as teacher_forced_logits produces them. They stay in memory while everything kept fits a
// byte budget; past it an entry goes to a file in a scratch directory and is read back a few rows at a time, so a
// long prompt does not hold [T, V] F32 for every kept path (a 1,000-token prompt with Qwen3's 151,936-token
// vocabulary is 608 MB a path). The comparison is tools/logit_diff.h's either way.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <vector>

#include "core/tensor.h"
#include "tools/logit_diff.h"

namespace nvfp4lm {

class KeptLogits {
 public:
  // `memory_bytes`: what the kept logits may hold in memory; `scratch_dir` gives the directory for the rest (called
  // at the first spill only, so a run that never spills creates none).
  KeptLogits(int64_t memory_bytes, std::function<std::filesystem::path()> scratch_dir);
  ~KeptLogits();
  KeptLogits(KeptLogits&&) noexcept;
  KeptLogits& operator=(KeptLogits&&) noexcept;

  // Starts the next entry (index size() - 1) of [rows, vocab] F32, filled by append() in row order.
  void begin(int64_t rows, int64_t vocab);
  // Rows [row, row + block.dim(0)) of the entry begun last; `block` F32 [n, vocab] on the CPU.
  void append(int64_t row, const Tensor& block);
  // Feeds rows [row, row + block.dim(0)) of `block` against the same rows of entry `index` to `diff`, in order.
  void compare(size_t index, int64_t row, const Tensor& block, int64_t candidates, LogitDiffAccumulator& diff) const;

  size_t size() const { return entries_.size(); }
  bool spilled(size_t index) const { return !entries_.at(index).file.empty(); }

 private:
  struct Entry {
    Tensor tensor;               // in memory, or
    std::filesystem::path file;  // rows x vocab F32 on disk
    int64_t rows = 0, vocab = 0;
  };
  int64_t memory_bytes_;
  std::function<std::filesystem::path()> scratch_dir_;
  int64_t held_bytes_ = 0;
  std::vector<Entry> entries_;
};

}  // namespace nvfp4lm
