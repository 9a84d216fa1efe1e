#include "core/device.h"

#include <charconv>

#include "core/error.h"
#if NVFP4LM_HAS_CUDA
#include "core/cuda/runtime.h"
#endif

namespace nvfp4lm {

std::string Device::str() const { return is_cpu() ? std::string("cpu") : fmt::format("cuda:{}", index); }

std::string Device::label() const { return is_cuda() && cuda_is_emulated() ? str() + " (emulated on the CPU)" : str(); }

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "cuda" || text == "gpu") return cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    int index = -1;
    const char* begin = text.data() + 5;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(begin, end, index);
    if (ec == std::errc() && ptr == end && index >= 0) return cuda(index);
  }
  NVFP4LM_FAIL("unknown device '{}': use cpu, cuda or cuda:N", text);
}

std::string cuda_sm_text(int sm) { return fmt::format("{}.{}", sm / 10, sm % 10); }

std::string device_unavailable_reason(Device device) {
  if (device.is_cpu()) return {};
#if NVFP4LM_HAS_CUDA
  const int count = cuda::device_count();
  if (count == 0) return "no GPU is usable: " + cuda::unavailable_reason();
  if (device.index >= count)
    return fmt::format("{} does not exist: {} GPU(s) found (cuda:0..cuda:{})", device.str(), count, count - 1);
  const cuda::DeviceInfo info = cuda::device_info(device.index);
  const int sm = info.sm_major * 10 + info.sm_minor;
  if (sm < kMinCudaSm)
    return fmt::format("{} ({}) has SM {}; nvfp4lm's CUDA kernels need SM {} or newer", device.str(), info.name,
                       cuda_sm_text(sm), cuda_sm_text(kMinCudaSm));
  return {};
#else
  return "this nvfp4lm was built without CUDA (configure with -DNVFP4LM_CUDA=ON on a machine with the CUDA "
         "toolkit)";
#endif
}

bool device_memory_is_host_memory(Device device) {
#if NVFP4LM_HAS_CUDA
  return device.is_cuda() && device_unavailable_reason(device).empty() && cuda::device_info(device.index).integrated;
#else
  (void)device;
  return false;
#endif
}

void synchronize(Device device) {
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) cuda::synchronize();
#else
  (void)device;
#endif
}

}  // namespace nvfp4lm
