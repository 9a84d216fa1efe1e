// Memory of the emulated GPU: device allocations and pinned (page-locked, mapped) host allocations.
//  - Every device allocation is its own mapping with a PROT_NONE guard page on each side, its data ending at the
//    upper guard (start 256-byte aligned, like cudaMalloc's), so a kernel reading or writing past either end of a
//    buffer faults at once instead of touching a neighbour. Fresh memory is poisoned with 0xFF bytes (NaN as a
//    float, -1 as an integer) as a GPU's would hold stale data: a kernel that reads what nobody wrote shows it.
//  - The total is capped at settings().device_bytes, so out-of-memory paths can be tested.
//  - Pinned host memory is plain host memory the device sees at the same address (UVA).
// Thread-safe.
#pragma once

#include <cstddef>
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

void* pinned_allocate(size_t bytes);
bool pinned_free(void* pointer);
// Whether [pointer, pointer + bytes) lies inside one pinned host allocation.
bool is_pinned_range(const void* pointer, size_t bytes);

}  // namespace nvfp4lm::emu
