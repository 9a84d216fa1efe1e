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

// Product of dims, or nullopt when a dim is negative or the product exceeds kMaxFileTensorElements.
inline std::optional<uint64_t> checked_numel(const std::vector<int64_t>& dims) {
  bool has_zero = false;
  for (int64_t dim : dims) {
    if (dim < 0) return std::nullopt;
    has_zero = has_zero || dim == 0;
  }
  if (has_zero) return 0;
  uint64_t count = 1;
  for (int64_t dim : dims) {
    const auto d = static_cast<uint64_t>(dim);
    if (count > kMaxFileTensorElements / d) return std::nullopt;
    count *= d;
  }
  return count;
}

}  // namespace nvfp4lm
