// See stream.h.
#include "core/cuda/emu/stream.h"

#include <fmt/format.h>

#include <deque>
#include <map>
#include <mutex>

#include "core/cuda/emu/fault.h"
#include "core/cuda/emu/settings.h"

namespace nvfp4lm::emu {
namespace {

// Past this many queued operations the queue runs even without a synchronisation (bounded memory for a host
// that launches forever without waiting); that only makes execution earlier, which a GPU may also do.
constexpr size_t kMaxQueued = 4096;

struct Capture {
  CUgraph_st* graph = nullptr;
  bool invalidated = false;
};

struct Device {
  std::recursive_mutex mutex;
  std::deque<Work> queue;
  std::map<cudaStream_t, Capture> captures;
};

Device& device() {
  static auto* instance = new Device();
  return *instance;
}

cudaStream_t canonical(cudaStream_t stream) {
  // The legacy and per-thread default streams are one stream here.
  if (stream == cudaStreamLegacy || stream == cudaStreamPerThread) return nullptr;
  return stream;
}

// Runs the queue; the caller holds the mutex.
cudaError_t run_locked(Device& d) {
  while (!d.queue.empty()) {
    if (sticky_error() != cudaSuccess) {
      d.queue.clear();
      break;
    }
    Work work = std::move(d.queue.front());
    d.queue.pop_front();
    std::string fault;
    if (!work.run(fault)) {
      set_sticky_error(cudaErrorLaunchFailure, fault);
      d.queue.clear();
    }
  }
  return sticky_error();
}

}  // namespace

cudaError_t submit(cudaStream_t stream, Work work) {
  Device& d = device();
  std::lock_guard lock(d.mutex);
  if (const cudaError_t sticky = sticky_error(); sticky != cudaSuccess) return sticky;
  auto capture = d.captures.find(canonical(stream));
  if (capture != d.captures.end()) {
    if (!capture->second.invalidated) capture->second.graph->nodes.push_back(std::move(work));
    return cudaSuccess;
  }
  d.queue.push_back(std::move(work));
  if (settings().stream_mode == StreamMode::Sync || d.queue.size() >= kMaxQueued) return run_locked(d);
  return cudaSuccess;
}

cudaError_t run_queued() {
  Device& d = device();
  std::lock_guard lock(d.mutex);
  return run_locked(d);
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
  return run_queued();
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
  d.queue.clear();
  for (auto& [stream, capture] : d.captures) delete capture.graph;
  d.captures.clear();
}

}  // namespace nvfp4lm::emu
