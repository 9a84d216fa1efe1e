// See batch_invariance.h.
#include "ops/batch_invariance.h"

#include <atomic>

namespace nvfp4lm {
namespace {

std::atomic<bool> invariant{false};

}  // namespace

bool batch_invariant_kernels() { return invariant.load(std::memory_order_relaxed); }

void set_batch_invariant_kernels(bool on) { invariant.store(on, std::memory_order_relaxed); }

BatchInvariantKernels::BatchInvariantKernels(bool on) : previous_(batch_invariant_kernels()) {
  set_batch_invariant_kernels(on);
}

BatchInvariantKernels::~BatchInvariantKernels() { set_batch_invariant_kernels(previous_); }

}  // namespace nvfp4lm
