// What core/cuda asks of the emulated CUDA device besides the CUDA runtime and cuBLASLt functions (the
// NVFP4LM_CUDA=EMULATE build only). Declared here and defined by src/emu/ (settings.cpp), just as the runtime's own
// functions are declared by the CUDA headers and defined there: core/cuda calls the device, it never includes it
// (docs/DESIGN.md section 2). Not defined in other builds: call it only under NVFP4LM_CUDA_EMULATION.
#pragma once

#include <cstdint>
#include <string>

namespace nvfp4lm::cuda::emulated {

// NVFP4LM_EMU_GRID_CAP: the most blocks a grid-stride launch takes (core/cuda/grid_stride.h); 0 for no cap.
int64_t grid_stride_cap();
// How the emulated device runs, for logs and `diagnose`: "schedule warp-serial, 1 worker, deferred streams, ...".
std::string settings_summary();

}  // namespace nvfp4lm::cuda::emulated
