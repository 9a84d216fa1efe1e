// Kernel launches on the emulated device: the checks a GPU makes when a kernel is launched, the per-kernel
// attributes (cudaFuncSetAttribute), and running all blocks of a grid, on one or several OS threads
// (settings().workers; blocks of one grid run concurrently then, as on a GPU, and share memory through real
// atomics).
#pragma once

#include <driver_types.h>

#include <string>

#include "emu/kernel_launch.h"

namespace nvfp4lm::emu {

// cudaSuccess, or the error a GPU gives this configuration (too many threads, too much dynamic shared memory
// without the attribute, an empty grid, ...) with `why` in words.
cudaError_t check_launch(const LaunchRequest& request, std::string& why);

// cudaFuncAttributeMaxDynamicSharedMemorySize for a kernel (by its address).
cudaError_t set_max_dynamic_shared(const void* function, int bytes, std::string& why);

// Runs every block. Returns false with `fault` set when a thread faulted or a block deadlocked; blocks not yet
// started then do not run.
bool run_grid(const LaunchRequest& request, std::string& fault);

}  // namespace nvfp4lm::emu
