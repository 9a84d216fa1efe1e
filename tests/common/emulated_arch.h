// Tests of the Blackwell paths: the emulated CUDA device presents compute capability `arch` (x 10: 90, 100, 120,
// 121; what NVFP4LM_EMU_ARCH sets for a process, docs/cuda-emulation.md) for the scope of one object, and the
// previous one after. In a build for a real GPU it does nothing: the GPU is what it is, and the tests skip where it
// lacks what they need.
#pragma once

#if NVFP4LM_CUDA_EMULATION
#include "emu/settings.h"
#endif

namespace nvfp4lm::test {

class EmulatedArch {
 public:
  explicit EmulatedArch(int arch) {
#if NVFP4LM_CUDA_EMULATION
    saved_ = emu::settings_for_testing().arch;
    emu::settings_for_testing().arch = arch;
#else
    (void)arch;
#endif
  }
  ~EmulatedArch() {
#if NVFP4LM_CUDA_EMULATION
    emu::settings_for_testing().arch = saved_;
#endif
  }
  EmulatedArch(const EmulatedArch&) = delete;
  EmulatedArch& operator=(const EmulatedArch&) = delete;

 private:
  int saved_ = 0;
};

}  // namespace nvfp4lm::test
