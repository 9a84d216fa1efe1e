// Streams, events and graphs of the emulated device.
//
// Execution: all streams share one queue in enqueue order (one legal order for any set of streams). In the
// default deferred mode the queue runs only when the host synchronises (cudaStreamSynchronize,
// cudaDeviceSynchronize, cudaEventSynchronize, a copy to pageable host memory, cudaFree, ...), as a busy GPU
// would: a host read of a result the stream has not been synchronised with sees poison, not the answer. In sync
// mode (NVFP4LM_EMU_STREAM=sync) every operation runs inside the call that enqueues it.
//
// Capture: between cudaStreamBeginCapture and cudaStreamEndCapture a stream's operations are recorded as graph
// nodes (kernels with their argument values, copies, memsets, GEMMs), not run. What a GPU forbids while
// capturing (synchronising the stream or the device, copies to or from pageable host memory, cudaFree) returns
// cudaErrorStreamCaptureUnsupported and invalidates the capture, and cudaStreamEndCapture then fails with
// cudaErrorStreamCaptureInvalidated. A graph launch enqueues its nodes in order.
//
// A device fault stops the queue, drops what was still queued and becomes the sticky error (fault.h).
#pragma once

#include <driver_types.h>

#include <functional>
#include <string>
#include <vector>

namespace nvfp4lm::emu {

// One operation on a stream: returns false with `fault` set on a device fault.
struct Work {
  std::string what;  // for messages: "kernel rmsnorm_forward_kernel<float>", "memcpy 512 bytes", ...
  std::function<bool(std::string& fault)> run;
};

}  // namespace nvfp4lm::emu

struct CUstream_st {
  unsigned flags = 0;
};

struct CUevent_st {
  bool recorded = false;
  double seconds = 0;  // host clock when the stream reached the record
};

struct CUgraph_st {
  std::vector<nvfp4lm::emu::Work> nodes;
};

struct CUgraphExec_st {
  std::vector<nvfp4lm::emu::Work> nodes;
};

namespace nvfp4lm::emu {

// Runs `work` now (sync mode), queues it, or records it when `stream` is capturing. Returns the sticky error if
// the device has faulted.
cudaError_t submit(cudaStream_t stream, Work work);
// Runs everything queued. Returns the sticky error if the device has faulted (now or before).
cudaError_t run_queued();
// The same, but first: cudaErrorStreamCaptureUnsupported (and the capture invalidated) if `stream` is capturing
// (nullptr: if any stream is), because a synchronisation cannot be captured.
cudaError_t synchronize(cudaStream_t stream, std::string& why);
// Fails an operation a capture cannot hold (pageable copies, cudaFree) when `stream` (nullptr: any stream) is
// capturing: invalidates the capture and returns cudaErrorStreamCaptureUnsupported; cudaSuccess otherwise.
cudaError_t refuse_in_capture(cudaStream_t stream, const char* operation, std::string& why);
bool is_capturing(cudaStream_t stream);

cudaError_t begin_capture(cudaStream_t stream, cudaStreamCaptureMode mode, std::string& why);
cudaError_t end_capture(cudaStream_t stream, cudaGraph_t* graph, std::string& why);
cudaError_t launch_graph(cudaGraphExec_t exec, cudaStream_t stream, std::string& why);

// Drops queued work and captures (cudaDeviceReset).
void reset_streams();

}  // namespace nvfp4lm::emu
