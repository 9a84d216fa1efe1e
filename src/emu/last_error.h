// Error reporting of the emulated CUDA runtime: the per-thread "last error" behind cudaGetLastError, the sticky
// device error (fault.h) that every call returns once a kernel has faulted, and the detail the emulator knows
// about an error ("cudaMemcpyAsync: destination 0x... is not device memory"), which cudaGetErrorString returns
// together with CUDA's own text so nvfp4lm's messages carry it.
#pragma once

#include <driver_types.h>

#include <string>

namespace nvfp4lm::emu {

// Remembers a failed call's error for cudaGetLastError / cudaPeekAtLastError and its detail for
// cudaGetErrorString; returns `error` (cudaSuccess records nothing).
cudaError_t record_error(cudaError_t error, const std::string& detail);
// The sticky error, or cudaSuccess.
cudaError_t sticky_error_or_success();
cudaError_t take_last_error();
cudaError_t peek_last_error();
const char* error_string(cudaError_t error);
const char* error_name(cudaError_t error);

}  // namespace nvfp4lm::emu
