// Memory of the emulated GPU: device allocations and pinned (page-locked, mapped) host allocations.
//  - Device allocations are carved out of one reserved address range (device_span()), so "is this address device
//    memory?" is one comparison: the global-memory race check (global_race_check.h) asks it for every access a
//    kernel makes. Each allocation has a PROT_NONE guard page on each side, its data ending at the upper guard
//    (start 256-byte aligned, like cudaMalloc's), so a kernel reading or writing past either end of a buffer faults
//    at once instead of touching a neighbour. Freed ranges go back to PROT_NONE and are reused next-fit (as late as
//    possible), so a use after free faults too until the range is handed out again.
//  - Fresh memory is poisoned with 0xFF bytes (NaN as a float, -1 as an integer) as a GPU's would hold stale data:
//    a kernel that reads what nobody wrote shows it.
//  - The total is capped at settings().device_bytes, so out-of-memory paths can be tested.
//  - Pinned host memory is plain host memory the device sees at the same address (UVA).
// Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace nvfp4lm::emu {

// nullptr when the cap would be exceeded or the host is out of memory.
void* device_allocate(size_t bytes);
// False when `pointer` is not the start of a live device allocation.
bool device_free(void* pointer);
// Whether [pointer, pointer + bytes) lies inside one device allocation.
bool is_device_range(const void* pointer, size_t bytes);
size_t device_allocated_bytes();
// What a faulting address is ("3 bytes past the end of a device allocation of 512 bytes at 0x...") or "".
std::string device_memory_describe(const void* address);

// The reserved range every device allocation lies in: [device_base(), device_base() + device_span()). Both are 0
// until the first allocation; they never change after it.
struct DeviceSpan {
  uintptr_t base = 0;
  size_t bytes = 0;
};
extern DeviceSpan device_span_of_process;
inline bool in_device_span(const void* address) {
  return reinterpret_cast<uintptr_t>(address) - device_span_of_process.base < device_span_of_process.bytes;
}

void* pinned_allocate(size_t bytes);
bool pinned_free(void* pointer);
// Whether [pointer, pointer + bytes) lies inside one pinned host allocation.
bool is_pinned_range(const void* pointer, size_t bytes);

}  // namespace nvfp4lm::emu
