// See model_formats.h.
#include "io/model_formats.h"

namespace nvfp4lm {
namespace {

// title, NVFP4 weights, stores tensor scale, fused groups share it, activation scales
constexpr FormatCapabilities kModelopt{"NVFP4 (ModelOpt safetensors)", true, true, true, true};
// Stores the tensor scale as its reciprocal (io/compressed_tensors.h): exact for 7 floats in 8, one ulp off otherwise.
constexpr FormatCapabilities kCompressedTensors{"NVFP4 (compressed-tensors safetensors)", true, true, true, true};
constexpr FormatCapabilities kDat{"NVFP4 (.dat)", true, false, false, false};
constexpr FormatCapabilities kGgufNvfp4{"GGUF", true, true, false, false};
constexpr FormatCapabilities kGgufDense{"GGUF", false, false, false, false};
constexpr FormatCapabilities kBf16{"BF16 safetensors", false, false, false, false};

}  // namespace

const FormatCapabilities& format_capabilities(ModelFormat format, gguf::GgmlType gguf_type) {
  switch (format) {
    case ModelFormat::ModeloptNvfp4:
      return kModelopt;
    case ModelFormat::CompressedTensorsNvfp4:
      return kCompressedTensors;
    case ModelFormat::Dat:
      return kDat;
    case ModelFormat::Gguf:
      return gguf_type == gguf::GgmlType::NVFP4 ? kGgufNvfp4 : kGgufDense;
    case ModelFormat::HfSafetensors:
      break;
  }
  return kBf16;
}

bool holds_tensor_scale(const FormatCapabilities& format, float tensor_scale) {
  return format.nvfp4_weights && (format.stores_tensor_scale || tensor_scale == 1.0f);
}

}  // namespace nvfp4lm
