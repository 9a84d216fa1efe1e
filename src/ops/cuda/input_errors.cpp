// Slots for bad inputs found by kernels (see input_errors.h): two 64-bit words of pinned, device-mapped host
// memory. A set slot holds 1 << 63 | row << 32 | value (row truncated to 31 bits).
#include "ops/cuda/input_errors.h"

#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <mutex>

#include "core/cuda/check.h"
#include "core/error.h"

namespace nvfp4lm::cuda {
namespace {

constexpr int kKinds = 2;

struct Slots {
  unsigned long long* host = nullptr;
  unsigned long long* device = nullptr;  // the same memory as the kernels see it (equal to host with UVA)
  std::array<std::atomic<int64_t>, kKinds> limits{};
};

Slots& slots() {
  static Slots* instance = [] {
    auto* s = new Slots();  // never freed: kernels may still write to it while the process exits
    void* memory = nullptr;
    NVFP4LM_CUDA_CHECK(
        cudaHostAlloc(&memory, kKinds * sizeof(unsigned long long), cudaHostAllocMapped | cudaHostAllocPortable));
    s->host = static_cast<unsigned long long*>(memory);
    for (int i = 0; i < kKinds; ++i) s->host[i] = 0;
    void* device = nullptr;
    NVFP4LM_CUDA_CHECK(cudaHostGetDevicePointer(&device, memory, 0));
    s->device = static_cast<unsigned long long*>(device);
    return s;
  }();
  return *instance;
}

}  // namespace

unsigned long long* input_error_slot(InputErrorKind kind) { return slots().device + static_cast<int>(kind); }

void set_input_error_limit(InputErrorKind kind, int64_t limit) {
  slots().limits[static_cast<size_t>(kind)].store(limit, std::memory_order_relaxed);
}

void throw_pending_input_errors() {
  Slots& s = slots();
  for (int kind = 0; kind < kKinds; ++kind) {
    volatile unsigned long long* slot = s.host + kind;
    const unsigned long long word = *slot;
    if (word == 0) continue;
    *slot = 0;
    const int64_t row = static_cast<int64_t>((word >> 32) & 0x7fffffffull);
    const auto value = static_cast<int32_t>(static_cast<uint32_t>(word & 0xffffffffull));
    const int64_t limit = s.limits[static_cast<size_t>(kind)].load(std::memory_order_relaxed);
    if (static_cast<InputErrorKind>(kind) == InputErrorKind::EmbeddingId) {
      NVFP4LM_FAIL(
          "embedding_forward: token id {} at position {} is outside the vocabulary [0, {}) (the data or tokenizer "
          "does not match the model; found by the GPU kernel, reported at the next call)",
          value, row, limit);
    }
    NVFP4LM_FAIL(
        "rope: position {} of token {} is outside the RoPE table [0, {}) (the sequence is longer than the context the "
        "model was set up for; found by the GPU kernel, reported at the next call)",
        value, row, limit);
  }
}

}  // namespace nvfp4lm::cuda
