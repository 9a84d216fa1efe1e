// Memory accounting. Every byte a Tensor allocates is counted against its device: current, peak, the
// peak of each named phase ("load", "forward", "backward", "optimizer", "export"...), and an optional hard
// limit that fails *before* the allocation with a message saying what was asked and what is in use.
// mmap'd file views are not allocations and are not counted (the page cache owns them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"

namespace nvfp4lm {

struct PhasePeak {
  std::string phase;
  Device device;
  size_t peak_bytes = 0;
};

class MemoryTracker {
 public:
  static MemoryTracker& instance();

  // Throws Error if the allocation would exceed the device's limit; counts it otherwise.
  void reserve(Device device, size_t bytes, const char* what = nullptr);
  void release(Device device, size_t bytes);

  size_t current_bytes(Device device) const;
  size_t peak_bytes(Device device) const;
  // 0 = unlimited.
  void set_limit(Device device, size_t bytes);
  size_t limit_bytes(Device device) const;

  // Unified memory (device_memory_is_host_memory: the GPU's memory is the host's): from now on `device`'s tensors
  // and the CPU's count together against `device`'s limit, and shared_peak_bytes() is their joint peak. One device
  // at a time (an integrated GPU is its machine's only one).
  void share_with_host(Device device);
  bool shares_with_host(Device device) const;
  size_t shared_peak_bytes() const;

  // Phases: the current phase's peak starts at the current usage; phases with the same name merge.
  void begin_phase(const std::string& name);
  std::string current_phase() const;
  std::vector<PhasePeak> phase_peaks() const;
  void clear_phases();

 private:
  struct Counters {
    size_t current = 0;
    size_t peak = 0;
    size_t limit = 0;
  };
  Counters& counters(Device device);
  const Counters* find(Device device) const;

  bool in_shared_pool(Device device) const;

  mutable std::mutex mutex_;
  std::map<std::pair<int, int>, Counters> devices_;
  std::optional<std::pair<int, int>> shared_device_;  // share_with_host's device
  size_t shared_current_ = 0, shared_peak_ = 0;       // the CPU's bytes plus shared_device_'s
  std::string phase_ = "startup";
  std::map<std::pair<std::string, std::pair<int, int>>, size_t> phase_peaks_;
  std::vector<std::string> phase_order_;
};

// RAII: sets a phase for the scope, restores the previous name after.
class MemoryPhase {
 public:
  explicit MemoryPhase(const std::string& name);
  ~MemoryPhase();
  MemoryPhase(const MemoryPhase&) = delete;
  MemoryPhase& operator=(const MemoryPhase&) = delete;

 private:
  std::string previous_;
};

// Peak resident set size of this process (getrusage), in bytes.
size_t peak_rss_bytes();
// Current resident set size (/proc/self/statm), in bytes; 0 if unavailable.
size_t current_rss_bytes();

inline double to_gib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }
inline double to_mib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

}  // namespace nvfp4lm
