// Overflow-safe element and byte counts for shapes read from files. A file can claim any dims; these return
// nullopt instead of wrapping around, so parsers can reject absurd shapes before allocating or reading.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace nvfp4lm {

// No tensor we read has more elements than this (2^50, far beyond any model, small enough that
// numel * 8 bytes cannot overflow a uint64).
inline constexpr uint64_t kMaxFileTensorElements = uint64_t{1} << 50;

// Product of dims, or nullopt when a dim is negative or the non-zero dims multiply past kMaxFileTensorElements
// (a shape like [0, 2^40, 2^40] holds nothing, but its strides would overflow: it is as absurd as its product).
inline std::optional<uint64_t> checked_numel(const std::vector<int64_t>& dims) {
  bool has_zero = false;
  uint64_t nonzero_product = 1;
  for (int64_t dim : dims) {
    if (dim < 0) return std::nullopt;
    if (dim == 0) {
      has_zero = true;
      continue;
    }
    const auto d = static_cast<uint64_t>(dim);
    if (nonzero_product > kMaxFileTensorElements / d) return std::nullopt;
    nonzero_product *= d;
  }
  return has_zero ? 0 : nonzero_product;
}

}  // namespace nvfp4lm
