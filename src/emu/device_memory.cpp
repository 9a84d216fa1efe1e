// See device_memory.h.
#include "emu/device_memory.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>

#include "core/error.h"
#include "emu/global_race_check.h"
#include "emu/os_pages.h"
#include "emu/settings.h"

namespace nvfp4lm::emu {

DeviceSpan device_span_of_process;

namespace {

constexpr size_t kAlignment = 256;
constexpr unsigned char kDeviceMemoryPoison = 0xFF;
// Address space reserved for device memory: room for the reported capacity several times over (guard pages,
// next-fit reuse), at least 64 GiB. Reserved, not committed: PROT_NONE pages cost nothing.
constexpr size_t kMinimumReservation = size_t(64) << 30;
constexpr size_t kReservationPerDeviceByte = 4;
constexpr size_t kMaximumReservation = size_t(16) << 40;  // 16 TiB: well inside a 47-bit address space

size_t round_up(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

size_t usable_bytes(size_t requested) { return round_up(std::max<size_t>(requested, 1), kAlignment); }

struct Allocation {
  size_t bytes;            // what was asked for
  unsigned char* mapping;  // guard, data pages, guard
  size_t mapping_bytes;
};

struct Memory {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> device;   // by data start
  std::map<uintptr_t, size_t> free_ranges;  // unused parts of the reservation: start -> bytes
  uintptr_t rover = 0;                      // next-fit: where the last allocation ended
  std::map<uintptr_t, size_t> pinned;       // by start: bytes
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

// Reserves the device address range on first use. Caller holds the mutex.
bool reserve(Memory& m) {
  if (device_span_of_process.bytes != 0) return true;
  const size_t bytes = round_up(
      std::clamp(settings().device_bytes * kReservationPerDeviceByte, kMinimumReservation, kMaximumReservation),
      page_bytes());
  void* base = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return false;
  m.free_ranges.emplace(reinterpret_cast<uintptr_t>(base), bytes);
  m.rover = reinterpret_cast<uintptr_t>(base);
  device_span_of_process = DeviceSpan{reinterpret_cast<uintptr_t>(base), bytes};
  return true;
}

// Takes `bytes` of the reservation, next-fit from the rover (wrapping once). 0 when nothing fits.
uintptr_t take_range(Memory& m, size_t bytes) {
  for (int pass = 0; pass < 2; ++pass) {
    auto it = pass == 0 ? containing(m.free_ranges, m.rover) : m.free_ranges.begin();
    if (pass == 0 && it == m.free_ranges.end()) it = m.free_ranges.lower_bound(m.rover);
    for (; it != m.free_ranges.end(); ++it) {
      const uintptr_t range_start = it->first, range_end = it->first + it->second;
      const uintptr_t start = pass == 0 ? std::max(range_start, m.rover) : range_start;
      if (start >= range_end || range_end - start < bytes) continue;
      m.free_ranges.erase(it);
      if (start > range_start) m.free_ranges.emplace(range_start, start - range_start);
      if (start + bytes < range_end) m.free_ranges.emplace(start + bytes, range_end - start - bytes);
      m.rover = start + bytes;
      return start;
    }
  }
  return 0;
}

// Gives a range back, merged with free neighbours.
void return_range(Memory& m, uintptr_t start, size_t bytes) {
  auto next = m.free_ranges.lower_bound(start);
  if (next != m.free_ranges.end() && next->first == start + bytes) {
    bytes += next->second;
    next = m.free_ranges.erase(next);
  }
  if (next != m.free_ranges.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == start) {
      start = previous->first;
      bytes += previous->second;
      m.free_ranges.erase(previous);
    }
  }
  m.free_ranges.emplace(start, bytes);
}

}  // namespace

void* device_allocate(size_t bytes) {
  Memory& m = memory();
  const size_t page = page_bytes();
  const size_t data = usable_bytes(bytes);
  const size_t data_pages = round_up(data, page);
  const size_t mapping_bytes = data_pages + 2 * page;
  std::lock_guard lock(m.mutex);
  if (m.device_total + data > settings().device_bytes || !reserve(m)) return nullptr;
  const uintptr_t range = take_range(m, mapping_bytes);
  if (range == 0) return nullptr;
  auto* mapping = reinterpret_cast<unsigned char*>(range);
  if (mprotect(mapping + page, data_pages, PROT_READ | PROT_WRITE) != 0) {
    return_range(m, range, mapping_bytes);
    return nullptr;
  }
  global_race_check_pages(range + page, data_pages, true);
  m.device_total += data;
  unsigned char* start = mapping + page + data_pages - data;  // ends at the upper guard page
  std::memset(start, kDeviceMemoryPoison, data);
  m.device.emplace(reinterpret_cast<uintptr_t>(start), Allocation{bytes, mapping, mapping_bytes});
  return start;
}

bool device_free(void* pointer) {
  Memory& m = memory();
  std::lock_guard lock(m.mutex);
  auto it = m.device.find(reinterpret_cast<uintptr_t>(pointer));
  if (it == m.device.end()) return false;
  const Allocation allocation = it->second;
  m.device.erase(it);
  m.device_total -= usable_bytes(allocation.bytes);
  const size_t page = page_bytes();
  global_race_check_pages(reinterpret_cast<uintptr_t>(allocation.mapping) + page, allocation.mapping_bytes - 2 * page,
                          false);
  // A fresh PROT_NONE mapping over the range: its pages go back to the system and a use after free faults.
  void* again = mmap(allocation.mapping, allocation.mapping_bytes, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  NVFP4LM_ASSERT(again == allocation.mapping, "emulated CUDA: cannot unmap a freed device allocation");
  return_range(m, reinterpret_cast<uintptr_t>(allocation.mapping), allocation.mapping_bytes);
  return true;
}

bool is_device_range(const void* pointer, size_t bytes) {
  Memory& m = memory();
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  std::lock_guard lock(m.mutex);
  auto it = containing(m.device, address);
  if (it == m.device.end()) return false;
  return address + bytes <= it->first + usable_bytes(it->second.bytes);
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
    if (address < start + allocation.bytes)
      return fmt::format("byte {} of a device allocation of {} bytes at {:#x}", address - start, allocation.bytes,
                         start);
    return fmt::format("{} bytes past the end of a device allocation of {} bytes at {:#x}",
                       address - start - allocation.bytes, allocation.bytes, start);
  }
  if (in_device_span(pointer)) return "device memory that is not allocated (freed, or never handed out)";
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
