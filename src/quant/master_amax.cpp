#include "quant/master_amax.h"

#include <cstring>

#include "core/error.h"
#include "core/numeric.h"
#include "core/storage.h"
#include "quant/tensor_amax.h"

namespace nvfp4lm {
namespace {

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
    fail_non_finite_element(master, index, element_value(master, index), what);
  }
  return bits_float(result.amax_bits);
}

}  // namespace nvfp4lm
