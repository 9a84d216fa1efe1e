// Device faults of the emulated GPU. As on a GPU they are sticky: once a kernel faults, every later runtime call
// returns the error (cudaErrorLaunchFailure, "unspecified launch failure") until cudaDeviceReset. Unlike a GPU
// the emulator says what happened: the fault's detail (kernel, block, thread, what) is printed to stderr once
// and is what cudaGetErrorString returns for that error, so nvfp4lm's own error messages carry it.
//
// Invalid memory accesses by kernel code (a device allocation's guard page, the shared-memory guard, a thread's
// stack guard, anything unmapped) raise SIGSEGV. The handler installed here names the kernel, block and thread
// and what the address is, then lets the signal take its normal course (the process ends, as a GPU's context
// would be lost).
#pragma once

#include <driver_types.h>

#include <string>

namespace nvfp4lm::emu {

void set_sticky_error(cudaError_t error, const std::string& detail);
cudaError_t sticky_error();
std::string sticky_detail();
// Forgets a sticky error (cudaDeviceReset, and the emulator's own tests of faults).
void clear_sticky_error();

// Gives the calling OS thread an alternate signal stack (a fiber stack overflow must still be reported) and
// installs the process's SIGSEGV / SIGBUS handler on first use.
void install_fault_handler_for_this_thread();

}  // namespace nvfp4lm::emu
