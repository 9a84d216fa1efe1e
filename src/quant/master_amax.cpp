#include "quant/master_amax.h"

#include <cstring>

#include "core/storage.h"
#include "quant/nvfp4_fixed_scale.h"

#if NVFP4LM_HAS_CUDA
#include "quant/cuda/nvfp4_cuda.h"
#endif

namespace nvfp4lm {
namespace {

// weight_amax's error, for a non-finite element at flat `index` whose value is `value`.
[[noreturn]] void fail_non_finite(const Tensor& master, int64_t index, float value, const std::string& what) {
  const int64_t cols = master.rank() >= 1 ? master.dim(-1) : 1;
  NVFP4LM_FAIL("{}: non-finite value {} at row {}, column {}", what, value, cols ? index / cols : 0,
               cols ? index % cols : 0);
}

// Element `index` of a contiguous F32 / BF16 tensor on any device, as fp32.
float element_value(const Tensor& master, int64_t index) {
  const size_t bytes = dtype_bytes(master.dtype());
  unsigned char element[4] = {};
  copy_bytes(element, Device::cpu(), static_cast<const unsigned char*>(master.raw()) + index * bytes, master.device(),
             bytes);
  if (master.dtype() == DType::BF16) {
    uint16_t bits;
    std::memcpy(&bits, element, 2);
    return bf16_to_float(bits);
  }
  float value;
  std::memcpy(&value, element, 4);
  return value;
}

}  // namespace

float master_weight_amax(const Tensor& master, const std::string& what) {
  NVFP4LM_ASSERT(master.defined(), "{}: no master weight", what);
  if (master.device().is_cpu()) return weight_amax(master, what);
#if NVFP4LM_HAS_CUDA
  NVFP4LM_ASSERT(master.dtype() == DType::F32 || master.dtype() == DType::BF16,
                 "{}: master weight on {} is {}, expected F32 or BF16", what, master.device().str(), master.str());
  const Tensor input = master.contiguous();
  // Any shape as the matrix [numel / last dim, last dim] (a scalar is [1, 1]).
  const int64_t cols = input.rank() >= 1 ? input.dim(-1) : 1;
  const int64_t rows = cols ? input.numel() / cols : 0;
  Tensor scratch = Tensor::empty({cuda::kNvfp4AmaxScratchBytes}, DType::U8, input.device());
  const cuda::Nvfp4AmaxResult result =
      cuda::nvfp4_amax(input.raw(), input.dtype() == DType::BF16, rows, cols, scratch.raw());
  if (result.first_non_finite >= 0) fail_non_finite(input, result.first_non_finite, result.non_finite_value, what);
  return result.amax;
#else
  NVFP4LM_FAIL("{}: master weight on {} in a build without CUDA", what, master.device().str());
#endif
}

AmaxAccumulator* UpdatedMasterAmaxes::record(std::span<const Tensor> masters) {
  NVFP4LM_ASSERT(entries_.empty(), "UpdatedMasterAmaxes: one update per object, and this one was recorded already");
  if (masters.empty()) return nullptr;
  const Device device = masters.front().device();
  for (const Tensor& master : masters) {
    NVFP4LM_ASSERT(master.device() == device && master.is_contiguous() &&
                       (master.dtype() == DType::F32 || master.dtype() == DType::BF16),
                   "UpdatedMasterAmaxes: master {} must be a contiguous F32 or BF16 tensor on {}", master.str(),
                   device.str());
    const bool added = index_by_data_.emplace(master.raw(), entries_.size()).second;
    NVFP4LM_ASSERT(added, "UpdatedMasterAmaxes: master {} recorded twice", master.str());
    entries_.push_back({master.numel(), master.dtype(), false});
  }
  const std::vector<AmaxAccumulator> empty(entries_.size());
  const auto bytes = static_cast<int64_t>(empty.size() * sizeof(AmaxAccumulator));
  accumulators_ = Tensor::empty({bytes}, DType::U8, device);
  copy_bytes(accumulators_.raw(), device, empty.data(), Device::cpu(), static_cast<size_t>(bytes));
  return static_cast<AmaxAccumulator*>(accumulators_.raw());
}

std::optional<float> UpdatedMasterAmaxes::take(const Tensor& master, const std::string& what) {
  const auto it = index_by_data_.find(master.raw());
  if (it == index_by_data_.end()) return std::nullopt;
  Entry& entry = entries_[it->second];
  if (entry.taken || entry.numel != master.numel() || entry.dtype != master.dtype() ||
      master.device() != accumulators_.device())
    return std::nullopt;
  if (read_back_.empty()) {
    read_back_.resize(entries_.size());
    copy_bytes(read_back_.data(), Device::cpu(), accumulators_.raw(), accumulators_.device(), accumulators_.nbytes());
  }
  entry.taken = true;
  ++taken_;
  const AmaxAccumulator& result = read_back_[it->second];
  if (result.first_non_finite != kNoNonFinite) {
    const auto index = static_cast<int64_t>(result.first_non_finite);
    fail_non_finite(master, index, element_value(master, index), what);
  }
  return bits_float(result.amax_bits);
}

}  // namespace nvfp4lm
