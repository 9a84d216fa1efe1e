// Streams, events and graphs of the emulated device.
//
// Ordering: work on one stream runs in order; work on different streams is ordered only where CUDA orders it:
// the legacy default stream waits for earlier work of blocking streams and they wait for its earlier work, while a
// stream made with cudaStreamNonBlocking (the one nvfp4lm uses) is ordered only by itself. Among operations that
// are free to go, the emulator runs the most recently enqueued first: the least flattering legal order, so work on
// the wrong stream, or a missing wait between streams, shows.
//
// Timing: in the default deferred mode work runs only when the host synchronises, and then only what that
// synchronisation covers (cudaStreamSynchronize: that stream's work and what it depends on; cudaDeviceSynchronize,
// cudaFree: everything; a copy to pageable host memory: the copy and what precedes it), as a busy GPU would: a host
// read of a result nobody synchronised with sees stale memory. In sync mode (NVFP4LM_EMU_STREAM=sync) every
// operation runs inside the call that enqueues it.
//
// Capture: between cudaStreamBeginCapture and cudaStreamEndCapture a stream's operations are recorded as graph
// nodes (kernels with their argument values, copies, memsets, GEMMs), not run. What a GPU forbids while
// capturing (synchronising the stream or the device, copies to or from pageable host memory, cudaFree) returns
// cudaErrorStreamCaptureUnsupported and invalidates the capture, and cudaStreamEndCapture then fails with
// cudaErrorStreamCaptureInvalidated. A graph launch enqueues its nodes in order.
//
// A device fault stops execution, drops what was still queued and becomes the sticky error (fault.h).
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
  unsigned flags = 0;  // cudaStreamNonBlocking: not ordered with the legacy default stream
};

struct CUevent_st {
  bool recorded = false;
  double seconds = 0;     // host clock when the stream reached the record
  uint64_t sequence = 0;  // the record's place in the queue (stream.h wait_for)
};

struct CUgraph_st {
  std::vector<nvfp4lm::emu::Work> nodes;
};

struct CUgraphExec_st {
  std::vector<nvfp4lm::emu::Work> nodes;
};

namespace nvfp4lm::emu {

// Runs `work` now (sync mode), queues it, or records it when `stream` is capturing. Returns the sticky error if
// the device has faulted. `queued_as` (optional) receives its sequence number for wait_for.
cudaError_t submit(cudaStream_t stream, Work work, uint64_t* queued_as = nullptr);
// Runs the queued operation `sequence` (if it has not run) and what it depends on (cudaEventSynchronize).
cudaError_t wait_for(uint64_t sequence);
// Like submit, then runs the operation and everything it depends on before returning (a copy to pageable host
// memory, cudaMemcpy): the host may use the result at once.
cudaError_t submit_and_wait(cudaStream_t stream, Work work);
// Runs everything queued on every stream. Returns the sticky error if the device has faulted (now or before).
cudaError_t run_queued();
// Runs what `stream` has queued and what that depends on; nullptr: every stream (cudaDeviceSynchronize). First:
// cudaErrorStreamCaptureUnsupported (and the capture invalidated) if the stream (nullptr: any stream) is capturing,
// because a synchronisation cannot be captured.
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
