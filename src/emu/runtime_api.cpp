// The CUDA runtime API functions nvfp4lm calls (cuda_runtime_api.h's own declarations), implemented on the
// emulated device: one GPU that reports itself as an sm_90 "nvfp4lm emulated CUDA device". Every call first
// returns the sticky error if a kernel has faulted (fault.h); failures are recorded for cudaGetLastError with the
// emulator's detail (last_error.h).
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "emu/block_runner.h"
#include "emu/device_memory.h"
#include "emu/fault.h"
#include "emu/grid.h"
#include "emu/last_error.h"
#include "emu/settings.h"
#include "emu/stream.h"

namespace nvfp4lm::emu {
namespace {

constexpr int kMultiprocessors = 132;  // an H100 SXM
constexpr int kL2Bytes = 50 << 20;

#define NVFP4LM_EMU_STICKY()                                                             \
  do {                                                                                   \
    if (const cudaError_t sticky = sticky_error(); sticky != cudaSuccess) return sticky; \
  } while (0)

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

const char* kind_name(cudaMemcpyKind kind) {
  switch (kind) {
    case cudaMemcpyHostToHost:
      return "host to host";
    case cudaMemcpyHostToDevice:
      return "host to device";
    case cudaMemcpyDeviceToHost:
      return "device to host";
    case cudaMemcpyDeviceToDevice:
      return "device to device";
    default:
      return "default";
  }
}

bool device_visible(const void* pointer, size_t bytes) {
  return is_device_range(pointer, bytes) || is_pinned_range(pointer, bytes);
}

// `wait`: return only when the copy is done (cudaMemcpy); a copy with a pageable host side waits anyway.
cudaError_t copy(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream, bool wait,
                 const char* call) {
  NVFP4LM_EMU_STICKY();
  if (count == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr)
    return record_error(cudaErrorInvalidValue, fmt::format("{}: null pointer", call));
  if (kind == cudaMemcpyDefault) {
    const bool dst_device = is_device_range(dst, count), src_device = is_device_range(src, count);
    kind = dst_device ? (src_device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                      : (src_device ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  }
  const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDeviceToDevice)
    return record_error(cudaErrorInvalidMemcpyDirection, fmt::format("{}: copy kind {}", call, static_cast<int>(kind)));
  if (dst_device && !device_visible(dst, count))
    return record_error(cudaErrorInvalidValue,
                        fmt::format("{} ({}): destination [{}, +{}) is not inside one device allocation", call,
                                    kind_name(kind), dst, count));
  if (src_device && !device_visible(src, count))
    return record_error(cudaErrorInvalidValue, fmt::format("{} ({}): source [{}, +{}) is not inside one device "
                                                           "allocation",
                                                           call, kind_name(kind), src, count));
  const bool dst_pageable = !dst_device && !is_pinned_range(dst, count);
  const bool src_pageable = !src_device && !is_pinned_range(src, count);
  std::string why;
  if (dst_pageable || src_pageable) {
    const std::string operation = fmt::format("{} ({}) with pageable host memory", call, kind_name(kind));
    if (const cudaError_t refused = refuse_in_capture(stream, operation.c_str(), why); refused != cudaSuccess)
      return record_error(refused, why);
  }
  Work work;
  work.what = fmt::format("{} of {} bytes ({})", call, count, kind_name(kind));
  if (src_pageable && !dst_pageable) {
    // From pageable host memory: staged before the call returns, so the caller may reuse its buffer at once.
    auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(src),
                                                               static_cast<const unsigned char*>(src) + count);
    work.run = [dst, staged](std::string&) {
      std::memcpy(dst, staged->data(), staged->size());
      return true;
    };
  } else {
    work.run = [dst, src, count](std::string&) {
      std::memmove(dst, src, count);
      return true;
    };
  }
  // To pageable host memory: the call returns once the copy (after what precedes it on the stream) is done.
  if (wait || dst_pageable) return record_error(submit_and_wait(stream, std::move(work)), {});
  return record_error(submit(stream, std::move(work)), {});
}

cudaError_t fill(void* dst, int value, size_t count, cudaStream_t stream, bool wait, const char* call) {
  NVFP4LM_EMU_STICKY();
  if (count == 0) return cudaSuccess;
  if (!device_visible(dst, count))
    return record_error(cudaErrorInvalidValue,
                        fmt::format("{}: [{}, +{}) is not inside one device allocation", call, dst, count));
  Work work;
  work.what = fmt::format("{} of {} bytes", call, count);
  work.run = [dst, value, count](std::string&) {
    std::memset(dst, value, count);
    return true;
  };
  return record_error(wait ? submit_and_wait(stream, std::move(work)) : submit(stream, std::move(work)), {});
}

}  // namespace
}  // namespace nvfp4lm::emu

using namespace nvfp4lm::emu;

extern "C" {

// ---- devices ------------------------------------------------------------------------------------------------

cudaError_t cudaGetDeviceCount(int* count) {
  *count = settings().devices;
  if (*count == 0) return record_error(cudaErrorNoDevice, "switched off by NVFP4LM_EMU_DEVICES=0");
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device != 0)
    return record_error(cudaErrorInvalidDevice, fmt::format("device {} (the emulator has one, device 0)", device));
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return record_error(cudaErrorInvalidDevice, fmt::format("device {}", device));
  std::memset(prop, 0, sizeof(*prop));
  std::snprintf(prop->name, sizeof(prop->name), "nvfp4lm emulated CUDA device (%s on the CPU)",
                arch_name(settings().arch).c_str());
  prop->major = settings().arch / 10;
  prop->minor = settings().arch % 10;
  prop->integrated = settings().arch == 121 ? 1 : 0;  // the GB10 shares the host's memory
  prop->totalGlobalMem = settings().device_bytes;
  prop->sharedMemPerBlock = kSharedPerBlockDefault;
  prop->sharedMemPerBlockOptin = shared_per_block_optin();
  prop->sharedMemPerMultiprocessor = 233472;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->multiProcessorCount = kMultiprocessors;
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->l2CacheSize = kL2Bytes;
  prop->unifiedAddressing = 1;
  prop->canMapHostMemory = 1;
  prop->concurrentKernels = 1;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (device != 0) return record_error(cudaErrorInvalidDevice, fmt::format("device {}", device));
  switch (attr) {
    case cudaDevAttrMultiProcessorCount:
      *value = kMultiprocessors;
      return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(shared_per_block_optin());
      return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock:
      *value = static_cast<int>(kSharedPerBlockDefault);
      return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor:
      *value = settings().arch / 10;
      return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor:
      *value = settings().arch % 10;
      return cudaSuccess;
    case cudaDevAttrMaxThreadsPerBlock:
      *value = 1024;
      return cudaSuccess;
    case cudaDevAttrWarpSize:
      *value = 32;
      return cudaSuccess;
    case cudaDevAttrL2CacheSize:
      *value = kL2Bytes;
      return cudaSuccess;
    default:
      return record_error(cudaErrorInvalidValue,
                          fmt::format("device attribute {} is not emulated", static_cast<int>(attr)));
  }
}

cudaError_t cudaDriverGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  std::string why;
  return record_error(synchronize(nullptr, why), why);
}

cudaError_t cudaDeviceReset(void) {
  // The sticky error and all queued or captured work go; allocations stay (the caching allocator above the
  // runtime still owns them). Enough for a test to go on after provoking a fault on purpose.
  reset_streams();
  clear_sticky_error();
  return cudaSuccess;
}

// ---- errors -------------------------------------------------------------------------------------------------

cudaError_t cudaGetLastError(void) { return take_last_error(); }
cudaError_t cudaPeekAtLastError(void) { return peek_last_error(); }
const char* cudaGetErrorString(cudaError_t error) { return error_string(error); }
const char* cudaGetErrorName(cudaError_t error) { return error_name(error); }

// ---- memory -------------------------------------------------------------------------------------------------

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  NVFP4LM_EMU_STICKY();
  *total = settings().device_bytes;
  *free = *total - std::min(*total, device_allocated_bytes());
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** pointer, size_t size) {
  NVFP4LM_EMU_STICKY();
  *pointer = nullptr;
  if (size == 0) return cudaSuccess;
  *pointer = device_allocate(size);
  if (*pointer == nullptr)
    return record_error(cudaErrorMemoryAllocation,
                        fmt::format("{} bytes with {} of {} bytes in use (NVFP4LM_EMU_DEVICE_GIB sets the size)", size,
                                    device_allocated_bytes(), settings().device_bytes));
  return cudaSuccess;
}

cudaError_t cudaFree(void* pointer) {
  NVFP4LM_EMU_STICKY();
  if (pointer == nullptr) return cudaSuccess;
  std::string why;
  if (const cudaError_t refused = refuse_in_capture(nullptr, "cudaFree", why); refused != cudaSuccess)
    return record_error(refused, why);
  if (const cudaError_t status = run_queued(); status != cudaSuccess) return status;  // cudaFree synchronises
  if (!device_free(pointer))
    return record_error(cudaErrorInvalidValue,
                        fmt::format("cudaFree({}): not the start of a device allocation", pointer));
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** pointer, size_t size, unsigned int) {
  NVFP4LM_EMU_STICKY();
  *pointer = pinned_allocate(size);
  if (*pointer == nullptr)
    return record_error(cudaErrorMemoryAllocation, fmt::format("{} bytes of pinned host memory", size));
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** pointer, size_t size) { return cudaHostAlloc(pointer, size, 0); }

cudaError_t cudaFreeHost(void* pointer) {
  NVFP4LM_EMU_STICKY();
  if (pointer == nullptr) return cudaSuccess;
  if (const cudaError_t status = run_queued(); status != cudaSuccess) return status;
  if (!pinned_free(pointer))
    return record_error(cudaErrorInvalidValue, fmt::format("cudaFreeHost({}): not pinned host memory", pointer));
  return cudaSuccess;
}

cudaError_t cudaHostGetDevicePointer(void** device, void* host, unsigned int flags) {
  NVFP4LM_EMU_STICKY();
  if (flags != 0 || !is_pinned_range(host, 1))
    return record_error(cudaErrorInvalidValue,
                        fmt::format("cudaHostGetDevicePointer({}): not pinned host memory", host));
  *device = host;  // unified addressing: the same address on both sides
  return cudaSuccess;
}

// The synchronous forms run on the legacy default stream: ordered after blocking streams' earlier work, not after
// a non-blocking stream's (CUDA's rule; stream.h).
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  return copy(dst, src, count, kind, nullptr, true, "cudaMemcpy");
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream) {
  return copy(dst, src, count, kind, stream, false, "cudaMemcpyAsync");
}

cudaError_t cudaMemset(void* dst, int value, size_t count) {
  return fill(dst, value, count, nullptr, true, "cudaMemset");
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t count, cudaStream_t stream) {
  return fill(dst, value, count, stream, false, "cudaMemsetAsync");
}

// ---- kernels ------------------------------------------------------------------------------------------------

cudaError_t cudaFuncSetAttribute(const void* function, cudaFuncAttribute attr, int value) {
  NVFP4LM_EMU_STICKY();
  std::string why;
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize)
    return record_error(set_max_dynamic_shared(function, value, why), why);
  if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) return cudaSuccess;
  return record_error(cudaErrorInvalidValue,
                      fmt::format("function attribute {} is not emulated", static_cast<int>(attr)));
}

// ---- streams ------------------------------------------------------------------------------------------------

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, 0); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  NVFP4LM_EMU_STICKY();
  *stream = new CUstream_st{flags};
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream == nullptr) return record_error(cudaErrorInvalidResourceHandle, "cudaStreamDestroy of the default stream");
  if (is_capturing(stream))
    return record_error(cudaErrorStreamCaptureUnsupported, "cudaStreamDestroy of a capturing stream");
  std::string why;
  const cudaError_t status = synchronize(stream, why);  // its work still completes, as on a GPU
  delete stream;
  return record_error(status, why);
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  std::string why;
  return record_error(synchronize(stream, why), why);
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  std::string why;
  return record_error(begin_capture(stream, mode, why), why);
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  std::string why;
  return record_error(end_capture(stream, graph, why), why);
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  NVFP4LM_EMU_STICKY();
  *status = is_capturing(stream) ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

// ---- events -------------------------------------------------------------------------------------------------

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, 0); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  NVFP4LM_EMU_STICKY();
  *event = new CUevent_st();
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  NVFP4LM_EMU_STICKY();
  if (event == nullptr) return record_error(cudaErrorInvalidResourceHandle, "cudaEventRecord of a null event");
  event->recorded = false;
  Work work;
  work.what = "event record";
  work.run = [event](std::string&) {
    event->recorded = true;
    event->seconds = now_seconds();
    return true;
  };
  return record_error(submit(stream, std::move(work), &event->sequence), {});
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  NVFP4LM_EMU_STICKY();
  return event->recorded ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (const cudaError_t status = wait_for(event->sequence); status != cudaSuccess) return status;
  return event->recorded ? cudaSuccess
                         : record_error(cudaErrorInvalidResourceHandle, "cudaEventSynchronize of an unrecorded event");
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  NVFP4LM_EMU_STICKY();
  if (!start->recorded || !end->recorded)
    return record_error(cudaErrorNotReady, "cudaEventElapsedTime: an event has not completed");
  *ms = static_cast<float>((end->seconds - start->seconds) * 1e3);
  return cudaSuccess;
}

// ---- graphs -------------------------------------------------------------------------------------------------

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  NVFP4LM_EMU_STICKY();
  if (graph == nullptr) return record_error(cudaErrorInvalidValue, "cudaGraphInstantiate of a null graph");
  *exec = new CUgraphExec_st{graph->nodes};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  NVFP4LM_EMU_STICKY();
  std::string why;
  return record_error(launch_graph(exec, stream, why), why);
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
  if (graph == nullptr || count == nullptr) return record_error(cudaErrorInvalidValue, "cudaGraphGetNodes");
  if (nodes != nullptr) {
    for (size_t i = 0; i < std::min(*count, graph->nodes.size()); ++i) nodes[i] = nullptr;  // no node handles here
  }
  *count = graph->nodes.size();
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}

}  // extern "C"
