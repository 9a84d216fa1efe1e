// See device_memory.h.
#include "core/cuda/emu/device_memory.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>

#include "core/cuda/emu/settings.h"

namespace nvfp4lm::emu {
namespace {

constexpr size_t kAlignment = 256;
constexpr unsigned char kPoison = 0xFF;

size_t page_bytes() {
  static const size_t bytes = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return bytes;
}

struct Allocation {
  size_t bytes;            // what was asked for
  unsigned char* mapping;  // guard, data pages, guard
  size_t mapping_bytes;
};

struct Memory {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> device;  // by data start
  std::map<uintptr_t, size_t> pinned;      // by start: bytes
  size_t device_total = 0;
};

Memory& memory() {
  static auto* instance = new Memory();  // never destroyed: kernels may run while the process exits
  return *instance;
}

// The allocation whose [start, start + bytes) or guard pages hold `address`, if any.
template <typename Map>
typename Map::const_iterator containing(const Map& map, uintptr_t address) {
  auto it = map.upper_bound(address);
  if (it == map.begin()) return map.end();
  return std::prev(it);
}

}  // namespace

void* device_allocate(size_t bytes) {
  Memory& m = memory();
  const size_t page = page_bytes();
  const size_t data = (std::max<size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
  const size_t data_pages = (data + page - 1) / page * page;
  const size_t mapping_bytes = data_pages + 2 * page;
  {
    std::lock_guard lock(m.mutex);
    if (m.device_total + data > settings().device_bytes) return nullptr;
    m.device_total += data;
  }
  void* mapping = mmap(nullptr, mapping_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping == MAP_FAILED) {
    std::lock_guard lock(m.mutex);
    m.device_total -= data;
    return nullptr;
  }
  auto* base = static_cast<unsigned char*>(mapping);
  if (mprotect(base + page, data_pages, PROT_READ | PROT_WRITE) != 0) {
    munmap(mapping, mapping_bytes);
    std::lock_guard lock(m.mutex);
    m.device_total -= data;
    return nullptr;
  }
  unsigned char* start = base + page + data_pages - data;  // ends at the upper guard page
  std::memset(start, kPoison, data);
  std::lock_guard lock(m.mutex);
  m.device.emplace(reinterpret_cast<uintptr_t>(start), Allocation{bytes, base, mapping_bytes});
  return start;
}

bool device_free(void* pointer) {
  Memory& m = memory();
  Allocation allocation{};
  {
    std::lock_guard lock(m.mutex);
    auto it = m.device.find(reinterpret_cast<uintptr_t>(pointer));
    if (it == m.device.end()) return false;
    allocation = it->second;
    m.device.erase(it);
    m.device_total -= (std::max<size_t>(allocation.bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
  }
  munmap(allocation.mapping, allocation.mapping_bytes);
  return true;
}

bool is_device_range(const void* pointer, size_t bytes) {
  Memory& m = memory();
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  std::lock_guard lock(m.mutex);
  auto it = containing(m.device, address);
  if (it == m.device.end()) return false;
  const size_t usable = (std::max<size_t>(it->second.bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
  return address + bytes <= it->first + usable;
}

size_t device_allocated_bytes() {
  Memory& m = memory();
  std::lock_guard lock(m.mutex);
  return m.device_total;
}

std::string device_memory_describe(const void* pointer) {
  Memory& m = memory();
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  // No lock: this runs in a signal handler, possibly while another thread holds it; a torn read only makes the
  // description worse.
  for (const auto& [start, allocation] : m.device) {
    const auto mapping = reinterpret_cast<uintptr_t>(allocation.mapping);
    if (address < mapping || address >= mapping + allocation.mapping_bytes) continue;
    if (address < start)
      return fmt::format("{} bytes before a device allocation of {} bytes at {:#x}", start - address, allocation.bytes,
                         start);
    return fmt::format("{} bytes past the end of a device allocation of {} bytes at {:#x}",
                       address - start - allocation.bytes, allocation.bytes, start);
  }
  return {};
}

void* pinned_allocate(size_t bytes) {
  void* pointer = nullptr;
  if (posix_memalign(&pointer, 4096, std::max<size_t>(bytes, 1)) != 0) return nullptr;
  Memory& m = memory();
  std::lock_guard lock(m.mutex);
  m.pinned.emplace(reinterpret_cast<uintptr_t>(pointer), bytes);
  return pointer;
}

bool pinned_free(void* pointer) {
  Memory& m = memory();
  {
    std::lock_guard lock(m.mutex);
    if (m.pinned.erase(reinterpret_cast<uintptr_t>(pointer)) == 0) return false;
  }
  std::free(pointer);
  return true;
}

bool is_pinned_range(const void* pointer, size_t bytes) {
  Memory& m = memory();
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  std::lock_guard lock(m.mutex);
  auto it = containing(m.pinned, address);
  return it != m.pinned.end() && address + bytes <= it->first + it->second;
}

}  // namespace nvfp4lm::emu
