#include "core/memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "core/memory_guard.h"

namespace nvfp4lm {
namespace {
std::pair<int, int> key(Device device) { return {static_cast<int>(device.kind), device.index}; }
}  // namespace

MemoryTracker& MemoryTracker::instance() {
  // Never destroyed: a static tensor (a test's cached model, a user's global) made before the tracker's first use is
  // destroyed after it at exit and releases its bytes here; into a destroyed map that looped forever.
  static MemoryTracker* const tracker = new MemoryTracker;
  return *tracker;
}

MemoryTracker::Counters& MemoryTracker::counters(Device device) { return devices_[key(device)]; }

const MemoryTracker::Counters* MemoryTracker::find(Device device) const {
  auto it = devices_.find(key(device));
  return it == devices_.end() ? nullptr : &it->second;
}

bool MemoryTracker::in_shared_pool(Device device) const {
  return shared_device_ && (device.is_cpu() || key(device) == *shared_device_);
}

void MemoryTracker::reserve(Device device, size_t bytes, const char* what) {
  // A tripped guard (core/memory_guard.h) stops the process at its next device allocation (host ones go on: they
  // may sit in OpenMP regions, where an exception cannot pass, and a checkpoint being saved finishes).
  if (!device.is_cpu()) check_memory_guard();
  std::lock_guard lock(mutex_);
  Counters& c = counters(device);
  const bool shared = in_shared_pool(device);
  const size_t shared_limit = shared ? devices_[*shared_device_].limit : 0;
  if (shared_limit != 0 && shared_current_ + bytes > shared_limit) {
    const Device gpu{static_cast<Device::Kind>(shared_device_->first), shared_device_->second};
    throw Error(fmt::format(
        "memory limit exceeded in phase '{}': allocating {:.1f} MiB{}{} on {} with {:.2f} GiB of CPU and {} tensors "
        "in use would pass the limit of {:.2f} GiB (--max-memory; {}'s memory is the host's, so the limit counts "
        "both); raise the limit or reduce batch size / sequence length",
        phase_, to_mib(bytes), what ? " for " : "", what ? what : "", device.str(), to_gib(shared_current_), gpu.str(),
        to_gib(shared_limit), gpu.str()));
  }
  if (c.limit != 0 && c.current + bytes > c.limit) {
    throw Error(fmt::format(
        "memory limit on {} exceeded in phase '{}': allocating {:.1f} MiB{}{} with {:.2f} GiB in use would pass "
        "the limit of {:.2f} GiB (--max-memory); raise the limit or reduce batch size / sequence length",
        device.str(), phase_, to_mib(bytes), what ? " for " : "", what ? what : "", to_gib(c.current),
        to_gib(c.limit)));
  }
  c.current += bytes;
  c.peak = std::max(c.peak, c.current);
  if (shared) {
    shared_current_ += bytes;
    shared_peak_ = std::max(shared_peak_, shared_current_);
  }
  auto phase_key = std::make_pair(phase_, key(device));
  size_t& phase_peak = phase_peaks_[phase_key];
  phase_peak = std::max(phase_peak, c.current);
}

void MemoryTracker::release(Device device, size_t bytes) {
  std::lock_guard lock(mutex_);
  Counters& c = counters(device);
  NVFP4LM_ASSERT(c.current >= bytes, "releasing {} bytes with {} counted on {}", bytes, c.current, device.str());
  c.current -= bytes;
  if (in_shared_pool(device)) shared_current_ -= bytes;
}

void MemoryTracker::share_with_host(Device device) {
  std::lock_guard lock(mutex_);
  NVFP4LM_ASSERT(device.is_cuda(), "share_with_host: {} is not a GPU", device.str());
  NVFP4LM_ASSERT(!shared_device_ || *shared_device_ == key(device), "share_with_host: {} after another GPU",
                 device.str());
  if (shared_device_) return;
  shared_device_ = key(device);
  shared_current_ = counters(device).current + counters(Device::cpu()).current;
  shared_peak_ = shared_current_;
}

bool MemoryTracker::shares_with_host(Device device) const {
  std::lock_guard lock(mutex_);
  return shared_device_ && key(device) == *shared_device_;
}

size_t MemoryTracker::shared_peak_bytes() const {
  std::lock_guard lock(mutex_);
  return shared_peak_;
}

size_t MemoryTracker::current_bytes(Device device) const {
  std::lock_guard lock(mutex_);
  const Counters* c = find(device);
  return c ? c->current : 0;
}

size_t MemoryTracker::peak_bytes(Device device) const {
  std::lock_guard lock(mutex_);
  const Counters* c = find(device);
  return c ? c->peak : 0;
}

void MemoryTracker::set_limit(Device device, size_t bytes) {
  std::lock_guard lock(mutex_);
  counters(device).limit = bytes;
}

size_t MemoryTracker::limit_bytes(Device device) const {
  std::lock_guard lock(mutex_);
  const Counters* c = find(device);
  return c ? c->limit : 0;
}

void MemoryTracker::begin_phase(const std::string& name) {
  std::lock_guard lock(mutex_);
  phase_ = name;
  if (std::find(phase_order_.begin(), phase_order_.end(), name) == phase_order_.end()) phase_order_.push_back(name);
  for (auto& [dev, c] : devices_) {
    size_t& phase_peak = phase_peaks_[std::make_pair(name, dev)];
    phase_peak = std::max(phase_peak, c.current);
  }
}

std::string MemoryTracker::current_phase() const {
  std::lock_guard lock(mutex_);
  return phase_;
}

std::vector<PhasePeak> MemoryTracker::phase_peaks() const {
  std::lock_guard lock(mutex_);
  std::vector<PhasePeak> result;
  for (const std::string& name : phase_order_) {
    for (const auto& [k, peak] : phase_peaks_) {
      if (k.first != name) continue;
      Device device{static_cast<Device::Kind>(k.second.first), k.second.second};
      result.push_back({name, device, peak});
    }
  }
  return result;
}

void MemoryTracker::clear_phases() {
  std::lock_guard lock(mutex_);
  phase_peaks_.clear();
  phase_order_.clear();
}

MemoryPhase::MemoryPhase(const std::string& name) : previous_(MemoryTracker::instance().current_phase()) {
  MemoryTracker::instance().begin_phase(name);
}

MemoryPhase::~MemoryPhase() { MemoryTracker::instance().begin_phase(previous_); }

size_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<size_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

size_t current_rss_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  long pages_total = 0, pages_resident = 0;
  int read = std::fscanf(f, "%ld %ld", &pages_total, &pages_resident);
  std::fclose(f);
  if (read != 2) return 0;
  return static_cast<size_t>(pages_resident) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

Device open_device(const std::string& text, double max_memory_gib) {
  const Device device = Device::parse(text);
  const std::string reason = device_unavailable_reason(device);
  NVFP4LM_CHECK(reason.empty(), "--device {}: {}; run `nvfp4lm diagnose` for details, or use --device cpu", text,
                reason);
  NVFP4LM_CHECK(std::isfinite(max_memory_gib) && max_memory_gib >= 0,
                "--max-memory must be a number of GiB >= 0 (0 = no limit), got {}", max_memory_gib);
  if (device_memory_is_host_memory(device)) MemoryTracker::instance().share_with_host(device);
  if (max_memory_gib == 0) return device;
  const double bytes = max_memory_gib * 1024.0 * 1024.0 * 1024.0;
  NVFP4LM_CHECK(bytes >= 1, "--max-memory {} GiB is less than a byte", max_memory_gib);
  MemoryTracker::instance().set_limit(device, static_cast<size_t>(bytes));
  return device;
}

}  // namespace nvfp4lm
