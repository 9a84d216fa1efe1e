// What each output format can hold: one row per format (GGUF split by the type of its projections), read by
// everything that decides how weights are written (io/export_plan.h for quantize and export, io/model_writer.h,
// io/model_copy.h), so that a rule such as "`.dat` stores no tensor scale" is stated once, here.
//
//   format                 NVFP4 weights  tensor scale       fused groups share it  input_scale (calibration)
//   modelopt-nvfp4         yes            per weight         yes (engines fuse)     yes
//   compressed-tensors     yes            per weight (1/x)   yes (engines fuse)     yes (1/x)
//   dat                    yes            none: reads as 1   -                      no
//   gguf, type nvfp4       yes            per weight         no ("<name>.scale")    no
//   gguf, q4_0/q8_0/f16/.. no             -                  -                      no
//   hf-safetensors (bf16)  no             -                  -                      no
#pragma once

#include <string_view>

#include "io/gguf_format.h"
#include "io/model_files.h"

namespace nvfp4lm {

struct FormatCapabilities {
  std::string_view title;      // "NVFP4 (ModelOpt safetensors)", for reports
  bool nvfp4_weights = false;  // holds NVFP4 codes and block scales (else every weight is written dense / encoded)
  bool stores_tensor_scale = false;  // false: an NVFP4 weight reads back with tensor scale 1, so it must have 1
  // An already-NVFP4 weight is kept as it is only when the members of its fused group (q/k/v, gate/up) share one
  // tensor scale: the engines that load the format fuse them into one GEMM with one scale.
  bool fused_groups_share_scale = false;
  bool activation_scales = false;  // stores input_scale from an activation calibration
};

// The row of `format`; gguf_type matters for Gguf only.
const FormatCapabilities& format_capabilities(ModelFormat format, gguf::GgmlType gguf_type = gguf::GgmlType::NVFP4);

// Whether an NVFP4 weight with this tensor scale can be written to the format as it is.
bool holds_tensor_scale(const FormatCapabilities& format, float tensor_scale);

}  // namespace nvfp4lm
