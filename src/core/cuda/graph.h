// CUDA graphs (host code, CUDA builds only): capture the work a function enqueues on stream() into a graph and
// replay it with one launch, so a decode step of a few hundred small kernels costs one launch instead of a few
// hundred (model/qwen3_decode_step.h).
//
// Capture uses cudaStreamCaptureModeRelaxed: the caching allocator may still call cudaMalloc while capturing.
// Blocks freed during the capture stay reserved for the graph (runtime.h hold_frees): its replays keep using
// their addresses, so they must never be handed to anyone else. They are counted by the MemoryTracker as
// "CUDA graph buffers" and returned when the graph is destroyed. Anything that synchronises the stream inside the
// captured function (a copy to the host, cuda::synchronize) breaks the capture; that is reported as an Error.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "core/cuda/runtime.h"

namespace nvfp4lm::cuda {

class CapturedGraph {
 public:
  CapturedGraph() = default;
  ~CapturedGraph();
  CapturedGraph(CapturedGraph&& other) noexcept;
  CapturedGraph& operator=(CapturedGraph&& other) noexcept;
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  bool valid() const { return exec_ != nullptr; }
  size_t nodes() const { return nodes_; }
  // Enqueues one replay on stream(); returns without waiting.
  void replay() const;

 private:
  friend CapturedGraph capture_graph(const char* what, const std::function<void()>& work);
  void reset();

  void* exec_ = nullptr;  // cudaGraphExec_t
  int device_ = 0;
  size_t nodes_ = 0;
  size_t held_bytes_ = 0;
  std::vector<HeldBlock> held_;
};

// Runs `work` with stream() capturing and instantiates the result. `what` names the work in errors.
CapturedGraph capture_graph(const char* what, const std::function<void()>& work);

}  // namespace nvfp4lm::cuda
