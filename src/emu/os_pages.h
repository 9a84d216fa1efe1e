// The operating system's page size: the unit of the emulator's guard pages (device memory, fiber stacks).
#pragma once

#include <unistd.h>

#include <cstddef>

namespace nvfp4lm::emu {

inline size_t page_bytes() {
  static const size_t bytes = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return bytes;
}

}  // namespace nvfp4lm::emu
