// See graph.h.
#include "core/cuda/graph.h"

#include <cuda_runtime.h>

#include <utility>

#include "core/cuda/check.h"
#include "core/error.h"
#include "core/memory.h"

namespace nvfp4lm::cuda {

CapturedGraph::~CapturedGraph() { reset(); }

CapturedGraph::CapturedGraph(CapturedGraph&& other) noexcept
    : exec_(std::exchange(other.exec_, nullptr)),
      device_(other.device_),
      nodes_(std::exchange(other.nodes_, 0)),
      held_bytes_(std::exchange(other.held_bytes_, 0)),
      held_(std::move(other.held_)) {
  other.held_.clear();
}

CapturedGraph& CapturedGraph::operator=(CapturedGraph&& other) noexcept {
  if (this != &other) {
    reset();
    exec_ = std::exchange(other.exec_, nullptr);
    device_ = other.device_;
    nodes_ = std::exchange(other.nodes_, 0);
    held_bytes_ = std::exchange(other.held_bytes_, 0);
    held_ = std::move(other.held_);
    other.held_.clear();
  }
  return *this;
}

void CapturedGraph::reset() {
  if (exec_ != nullptr || !held_.empty()) {
    // A replay may still be running and using the held blocks: wait for the stream before giving them back.
    // (Errors are ignored: this runs in destructors, and a failed stream has reported itself already.)
    cudaStreamSynchronize(stream());
    cudaGetLastError();
  }
  if (exec_ != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  exec_ = nullptr;
  for (const HeldBlock& block : held_) device_free(block.index, block.ptr, block.bytes);
  held_.clear();
  if (held_bytes_ > 0) MemoryTracker::instance().release(Device::cuda(device_), held_bytes_);
  held_bytes_ = 0;
  nodes_ = 0;
}

void CapturedGraph::replay() const {
  NVFP4LM_ASSERT(exec_ != nullptr, "CapturedGraph::replay: no graph was captured");
  NVFP4LM_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), stream()));
}

CapturedGraph capture_graph(const char* what, const std::function<void()>& work) {
  CapturedGraph graph;
  NVFP4LM_CUDA_CHECK(cudaGetDevice(&graph.device_));
  cudaStream_t s = stream();
  hold_frees(&graph.held_);
  cudaGraph_t captured = nullptr;
  cudaError_t status = cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
  if (status != cudaSuccess) {
    hold_frees(nullptr);
    NVFP4LM_CUDA_CHECK(status);
  }
  try {
    work();
  } catch (...) {
    cudaStreamEndCapture(s, &captured);
    if (captured != nullptr) cudaGraphDestroy(captured);
    cudaGetLastError();
    hold_frees(nullptr);
    throw;
  }
  status = cudaStreamEndCapture(s, &captured);
  hold_frees(nullptr);
  if (status != cudaSuccess || captured == nullptr) {
    cudaGetLastError();
    NVFP4LM_FAIL(
        "{}: CUDA graph capture failed: {} ({}); something in the captured work synchronised with the host. Run "
        "with --cuda-graph off to decode without graphs, and please report this",
        what, cudaGetErrorString(status), cudaGetErrorName(status));
  }
  size_t nodes = 0;
  cudaGraphGetNodes(captured, nullptr, &nodes);
  cudaGraphExec_t exec = nullptr;
  status = cudaGraphInstantiate(&exec, captured, 0);
  cudaGraphDestroy(captured);
  if (status != cudaSuccess) {
    cudaGetLastError();
    NVFP4LM_FAIL("{}: instantiating the captured CUDA graph ({} nodes) failed: {} ({}); run with --cuda-graph off",
                 what, nodes, cudaGetErrorString(status), cudaGetErrorName(status));
  }
  graph.exec_ = exec;
  graph.nodes_ = nodes;
  size_t held_bytes = 0;
  for (const HeldBlock& block : graph.held_) held_bytes += block.bytes;
  if (held_bytes > 0) MemoryTracker::instance().reserve(Device::cuda(graph.device_), held_bytes, "CUDA graph buffers");
  graph.held_bytes_ = held_bytes;
  return graph;
}

}  // namespace nvfp4lm::cuda
