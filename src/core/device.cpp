#include "core/device.h"

#include <charconv>

#include "core/error.h"

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

}  // namespace nvfp4lm
