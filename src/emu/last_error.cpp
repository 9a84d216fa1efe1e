// See last_error.h.
#include "emu/last_error.h"

#include <fmt/format.h>

#include <deque>
#include <map>
#include <mutex>

#include "emu/fault.h"

namespace nvfp4lm::emu {
namespace {

thread_local cudaError_t last_error = cudaSuccess;

struct Details {
  std::mutex mutex;
  std::map<cudaError_t, const std::string*> latest;
  std::deque<std::string> texts;  // never shrinks: strings handed out by cudaGetErrorString stay valid
};

Details& details() {
  static auto* instance = new Details();
  return *instance;
}

struct Known {
  cudaError_t error;
  const char* name;
  const char* text;
};

// The errors the emulator can return, with the CUDA runtime's names and texts.
constexpr Known kKnown[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidDeviceFunction, "cudaErrorInvalidDeviceFunction", "invalid device function"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorIllegalState, "cudaErrorIllegalState", "the operation cannot be performed in the present state"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
};

const Known* known(cudaError_t error) {
  for (const Known& k : kKnown)
    if (k.error == error) return &k;
  return nullptr;
}

}  // namespace

cudaError_t record_error(cudaError_t error, const std::string& detail) {
  if (error == cudaSuccess) return error;
  last_error = error;
  if (!detail.empty()) {
    Details& d = details();
    std::lock_guard lock(d.mutex);
    const Known* k = known(error);
    d.texts.push_back(fmt::format("{} (emulated CUDA device: {})", k != nullptr ? k->text : "error", detail));
    d.latest[error] = &d.texts.back();
  }
  return error;
}

cudaError_t sticky_error_or_success() { return sticky_error(); }

cudaError_t take_last_error() {
  if (const cudaError_t sticky = sticky_error(); sticky != cudaSuccess) return sticky;  // cannot be cleared
  const cudaError_t error = last_error;
  last_error = cudaSuccess;
  return error;
}

cudaError_t peek_last_error() {
  if (const cudaError_t sticky = sticky_error(); sticky != cudaSuccess) return sticky;
  return last_error;
}

const char* error_string(cudaError_t error) {
  if (const cudaError_t sticky = sticky_error(); sticky != cudaSuccess && error == sticky) {
    const Known* k = known(error);
    const std::string text =
        fmt::format("{} (emulated CUDA device fault: {})", k != nullptr ? k->text : "error", sticky_detail());
    Details& d = details();
    std::lock_guard lock(d.mutex);
    if (d.texts.empty() || d.texts.back() != text) d.texts.push_back(text);
    return d.texts.back().c_str();
  }
  {
    Details& d = details();
    std::lock_guard lock(d.mutex);
    auto it = d.latest.find(error);
    if (it != d.latest.end()) return it->second->c_str();
  }
  const Known* k = known(error);
  return k != nullptr ? k->text : "unrecognized error code";
}

const char* error_name(cudaError_t error) {
  const Known* k = known(error);
  return k != nullptr ? k->name : "cudaErrorUnknown";
}

}  // namespace nvfp4lm::emu
