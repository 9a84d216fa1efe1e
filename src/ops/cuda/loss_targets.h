// The targets of a fused lm_head loss on CUDA (ops/cross_entropy.h, ops/distillation.h), host side: brought to the
// host (the one synchronisation before the work), validated, compacted and uploaded again in one piece.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace nvfp4lm::cuda {

struct LossTargetRows {
  int64_t rows = 0;    // all rows
  int64_t tokens = 0;  // rows with a target (not kIgnoreIndex)
  Tensor index;        // on the device: [active rows | source row of every row (-1: ignored) | active rows' targets]
  const int32_t* active = nullptr;      // the rows with a target, in order
  const int32_t* source_row = nullptr;  // per row, its index among the active ones, or -1
  const int32_t* targets = nullptr;     // the targets of the active rows
  std::vector<int32_t> host_active;     // the active rows, on the host
  bool all_active() const { return tokens == rows; }
};

// targets: I32 [rows] on a CUDA device. Error naming `loss` for a target outside [0, vocab) other than -100 (it
// comes from data); pending input errors of earlier kernels (a bad token id in the embedding) are thrown first.
LossTargetRows compact_loss_targets(const Tensor& targets, int64_t vocab, const char* loss);

// The active rows of `matrix` ([rows, width] on the device): `matrix` itself when every row is active, else a
// compacted copy [tokens, width]. `what` names it in errors.
Tensor active_rows(const Tensor& matrix, const LossTargetRows& compact, const char* what);

}  // namespace nvfp4lm::cuda
