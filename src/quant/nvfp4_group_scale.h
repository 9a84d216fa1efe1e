// The one rule for NVFP4 tensor scales of fused projection groups, which `quantize`, the QAT refresh
// (model/qwen3_trainable.cpp) and `export` all apply, so an export is bit for bit the forward it was trained with.
//
// vLLM and TensorRT-LLM fuse q/k/v of a layer (and gate/up) into one GEMM with ONE tensor scale, so ModelOpt
// quantizes such a group with a shared scale from the group's joint amax; so do we. Which weights form a group is
// named by fused_scale_group (io/weight_names.h: "…self_attn.qkv", "…mlp.gate_up", every other weight alone).
// The scale is nvfp4_tensor_scale(max over the members' amax) = amax / (6 · 448); each member's amax is measured
// where it lives (quant/tensor_amax.h: the CPU scan, or the CUDA kernel, which gives the same value).
#pragma once

#include <string>

#include "core/tensor.h"

namespace nvfp4lm {

class Nvfp4GroupScale {
 public:
  // Adds a member: an F32/BF16/F16 tensor on the CPU or F32/BF16 on CUDA. Error naming `what`, the row and the
  // column of a non-finite element.
  void add(const Tensor& member, const std::string& what);
  // Adds a member whose amax is known (measured by the optimizer update that wrote it: quant/master_amax.h).
  void add_amax(float member_amax);
  float amax() const { return amax_; }
  float tensor_scale() const;  // the scale every member is quantized with

 private:
  float amax_ = 0.0f;
};

}  // namespace nvfp4lm
