// See stream.h.
#include "emu/stream.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>

#include "emu/fault.h"
#include "emu/settings.h"

namespace nvfp4lm::emu {
namespace {

// Past this many queued operations everything runs even without a synchronisation (bounded memory for a host
// that launches forever without waiting); running earlier is something a GPU may also do.
constexpr size_t kMaxQueued = 4096;

struct Capture {
  CUgraph_st* graph = nullptr;
  bool invalidated = false;
};

struct Pending {
  cudaStream_t stream;
  Work work;
  std::vector<uint64_t> after;  // operations that must run first (by sequence number)
};

struct Device {
  std::recursive_mutex mutex;
  uint64_t next_sequence = 1;
  std::map<uint64_t, Pending> pending;            // by sequence number
  std::map<cudaStream_t, uint64_t> last_pending;  // per stream: its newest queued operation
  std::map<cudaStream_t, Capture> captures;
};

Device& device() {
  static auto* instance = new Device();
  return *instance;
}

cudaStream_t canonical(cudaStream_t stream) {
  // The per-thread default stream is treated as the legacy one (nvfp4lm is not built with per-thread streams).
  if (stream == cudaStreamLegacy || stream == cudaStreamPerThread) return nullptr;
  return stream;
}

bool blocking(cudaStream_t stream) { return stream != nullptr && (stream->flags & cudaStreamNonBlocking) == 0; }

// Queues `work` on `stream` with CUDA's ordering; returns its sequence number. The caller holds the mutex.
uint64_t enqueue_locked(Device& d, cudaStream_t stream, Work work) {
  Pending item{stream, std::move(work), {}};
  auto depend_on_stream = [&](cudaStream_t other) {
    auto it = d.last_pending.find(other);
    if (it != d.last_pending.end()) item.after.push_back(it->second);
  };
  depend_on_stream(stream);
  if (stream == nullptr) {
    for (const auto& [other, last] : d.last_pending)
      if (blocking(other)) item.after.push_back(last);
  } else if (blocking(stream)) {
    depend_on_stream(nullptr);
  }
  const uint64_t sequence = d.next_sequence++;
  d.pending.emplace(sequence, std::move(item));
  d.last_pending[stream] = sequence;
  return sequence;
}

void forget_locked(Device& d, uint64_t sequence) {
  const cudaStream_t stream = d.pending.at(sequence).stream;
  d.pending.erase(sequence);
  auto last = d.last_pending.find(stream);
  if (last != d.last_pending.end() && last->second == sequence) d.last_pending.erase(last);
}

// Runs the operations in `wanted` (sequence numbers; empty: all) and everything they depend on, always the newest
// operation that is free to run first. The caller holds the mutex.
cudaError_t run_locked(Device& d, const std::vector<uint64_t>& wanted) {
  std::set<uint64_t> needed;
  std::vector<uint64_t> stack = wanted;
  if (wanted.empty())
    for (const auto& [sequence, item] : d.pending) needed.insert(sequence);
  while (!stack.empty()) {
    const uint64_t sequence = stack.back();
    stack.pop_back();
    auto it = d.pending.find(sequence);
    if (it == d.pending.end() || !needed.insert(sequence).second) continue;
    for (uint64_t before : it->second.after) stack.push_back(before);
  }
  while (!needed.empty()) {
    if (sticky_error() != cudaSuccess) break;
    uint64_t chosen = 0;
    for (auto it = needed.rbegin(); it != needed.rend() && chosen == 0; ++it) {
      const Pending& item = d.pending.at(*it);
      const bool free = std::none_of(item.after.begin(), item.after.end(),
                                     [&](uint64_t before) { return d.pending.count(before) != 0; });
      if (free) chosen = *it;
    }
    if (chosen == 0) break;  // cannot happen: the oldest needed operation is always free
    needed.erase(chosen);
    Work work = std::move(d.pending.at(chosen).work);
    forget_locked(d, chosen);
    std::string fault;
    if (!work.run(fault)) set_sticky_error(cudaErrorLaunchFailure, fault);
  }
  if (sticky_error() != cudaSuccess) {
    d.pending.clear();  // a faulted device runs nothing more
    d.last_pending.clear();
  }
  return sticky_error();
}

}  // namespace

cudaError_t submit(cudaStream_t stream, Work work, uint64_t* queued_as) {
  Device& d = device();
  std::lock_guard lock(d.mutex);
  if (const cudaError_t sticky = sticky_error(); sticky != cudaSuccess) return sticky;
  stream = canonical(stream);
  auto capture = d.captures.find(stream);
  if (capture != d.captures.end()) {
    if (!capture->second.invalidated) capture->second.graph->nodes.push_back(std::move(work));
    return cudaSuccess;
  }
  const uint64_t sequence = enqueue_locked(d, stream, std::move(work));
  if (queued_as != nullptr) *queued_as = sequence;
  if (settings().stream_mode == StreamMode::Sync) return run_locked(d, {sequence});
  if (d.pending.size() >= kMaxQueued) return run_locked(d, {});
  return cudaSuccess;
}

cudaError_t submit_and_wait(cudaStream_t stream, Work work) {
  Device& d = device();
  std::lock_guard lock(d.mutex);
  if (const cudaError_t sticky = sticky_error(); sticky != cudaSuccess) return sticky;
  return run_locked(d, {enqueue_locked(d, canonical(stream), std::move(work))});
}

cudaError_t wait_for(uint64_t sequence) {
  Device& d = device();
  std::lock_guard lock(d.mutex);
  return run_locked(d, {sequence});
}

cudaError_t run_queued() {
  Device& d = device();
  std::lock_guard lock(d.mutex);
  return run_locked(d, {});
}

cudaError_t refuse_in_capture(cudaStream_t stream, const char* operation, std::string& why) {
  Device& d = device();
  std::lock_guard lock(d.mutex);
  bool refused = false;
  for (auto& [captured, capture] : d.captures) {
    if (stream != nullptr && captured != canonical(stream)) continue;
    capture.invalidated = true;
    refused = true;
  }
  if (!refused) return cudaSuccess;
  why = fmt::format(
      "{} is not permitted while a stream is being captured into a CUDA graph; the capture is now "
      "invalidated",
      operation);
  return cudaErrorStreamCaptureUnsupported;
}

cudaError_t synchronize(cudaStream_t stream, std::string& why) {
  if (const cudaError_t refused = refuse_in_capture(stream, "synchronising", why); refused != cudaSuccess)
    return refused;
  Device& d = device();
  std::lock_guard lock(d.mutex);
  if (stream == nullptr) return run_locked(d, {});
  auto last = d.last_pending.find(canonical(stream));
  if (last == d.last_pending.end()) return sticky_error();
  return run_locked(d, {last->second});
}

bool is_capturing(cudaStream_t stream) {
  Device& d = device();
  std::lock_guard lock(d.mutex);
  return d.captures.count(canonical(stream)) != 0;
}

cudaError_t begin_capture(cudaStream_t stream, cudaStreamCaptureMode mode, std::string& why) {
  Device& d = device();
  std::lock_guard lock(d.mutex);
  if (const cudaError_t sticky = sticky_error(); sticky != cudaSuccess) return sticky;
  if (canonical(stream) == nullptr) {
    why = "the legacy default stream cannot be captured";
    return cudaErrorStreamCaptureUnsupported;
  }
  if (d.captures.count(stream) != 0) {
    why = "the stream is already capturing";
    return cudaErrorIllegalState;
  }
  if (mode != cudaStreamCaptureModeRelaxed && mode != cudaStreamCaptureModeGlobal &&
      mode != cudaStreamCaptureModeThreadLocal) {
    why = fmt::format("capture mode {}", static_cast<int>(mode));
    return cudaErrorInvalidValue;
  }
  d.captures[stream] = Capture{new CUgraph_st(), false};
  return cudaSuccess;
}

cudaError_t end_capture(cudaStream_t stream, cudaGraph_t* graph, std::string& why) {
  Device& d = device();
  std::lock_guard lock(d.mutex);
  auto it = d.captures.find(canonical(stream));
  if (it == d.captures.end()) {
    why = "the stream is not capturing";
    return cudaErrorIllegalState;
  }
  const Capture capture = it->second;
  d.captures.erase(it);
  if (capture.invalidated) {
    delete capture.graph;
    if (graph != nullptr) *graph = nullptr;
    why = "the capture was invalidated by an operation a graph cannot hold";
    return cudaErrorStreamCaptureInvalidated;
  }
  if (graph != nullptr) *graph = capture.graph;
  return cudaSuccess;
}

cudaError_t launch_graph(cudaGraphExec_t exec, cudaStream_t stream, std::string& why) {
  if (exec == nullptr) {
    why = "null graph exec";
    return cudaErrorInvalidValue;
  }
  Device& d = device();
  std::lock_guard lock(d.mutex);
  if (d.captures.count(canonical(stream)) != 0) {
    why = "launching a graph into a capturing stream is not emulated";
    return cudaErrorStreamCaptureUnsupported;
  }
  for (const Work& node : exec->nodes)
    if (const cudaError_t status = submit(stream, node); status != cudaSuccess) return status;
  return cudaSuccess;
}

void reset_streams() {
  Device& d = device();
  std::lock_guard lock(d.mutex);
  d.pending.clear();
  d.last_pending.clear();
  for (auto& [stream, capture] : d.captures) delete capture.graph;
  d.captures.clear();
}

}  // namespace nvfp4lm::emu
