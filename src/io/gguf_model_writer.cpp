// See gguf_model_writer.h.
#include "io/gguf_model_writer.h"

#include <algorithm>

#include "core/error.h"
#include "core/logging.h"
#include "io/gguf_quants.h"
#include "io/gguf_qwen3.h"
#include "io/model_writer.h"
#include "io/weight_names.h"

namespace nvfp4lm {
namespace {

using gguf::GgmlType;

constexpr int64_t kRowsPerChunk = 256;  // rows encoded per write: bounded memory whatever the tensor size

GgmlType dense_stored_type(DType dtype) {
  switch (dtype) {
    case DType::BF16:
      return GgmlType::BF16;
    case DType::F16:
      return GgmlType::F16;
    default:
      return GgmlType::F32;
  }
}

// A quantized type whose block does not divide the row: q8_0, then f16 (llama-quantize's fallbacks).
GgmlType fitting_type(GgmlType wanted, int64_t row, const std::string& name) {
  GgmlType type = wanted;
  while (row % gguf::block_layout(type).elements != 0) type = type == GgmlType::Q8_0 ? GgmlType::F16 : GgmlType::Q8_0;
  if (type != wanted)
    log::info("{}: rows of {} elements are not whole {} blocks ({}); stored as {}", name, row,
              gguf::ggml_type_name(wanted), gguf::block_layout(wanted).elements, gguf::ggml_type_name(type));
  return type;
}

GgmlType choose_type(const WeightPlan& weight, GgmlType export_type) {
  if (weight.nvfp4) {
    NVFP4LM_CHECK(export_type == GgmlType::NVFP4, "GGUF: '{}' is NVFP4 but the export type is {}", weight.name,
                  gguf::ggml_type_name(export_type));
    NVFP4LM_CHECK(weight.shape.rank() == 2 && weight.shape[1] % gguf::block_layout(GgmlType::NVFP4).elements == 0,
                  "GGUF: '{}' of shape {} cannot be stored as ggml NVFP4, whose blocks are 64 elements of a row; "
                  "choose --gguf-type q8_0 or f16",
                  weight.name, weight.shape.str());
    return GgmlType::NVFP4;
  }
  if (weight.shape.rank() == 1) return GgmlType::F32;
  const std::optional<WeightKind> kind = classify_weight_name(weight.name);
  const bool table = kind == WeightKind::Embedding || kind == WeightKind::LmHead;
  GgmlType wanted = export_type;
  if (export_type == GgmlType::NVFP4) {
    NVFP4LM_CHECK(table, "GGUF: the projection '{}' is dense, but an nvfp4 export needs it NVFP4", weight.name);
    return dense_stored_type(weight.dtype);
  }
  if (table && export_type == GgmlType::Q4_0) wanted = GgmlType::Q6_K;
  return fitting_type(wanted, weight.shape[weight.shape.rank() - 1], weight.name);
}

}  // namespace

gguf::GgmlType parse_gguf_type(std::string_view name) {
  for (GgmlType type : {GgmlType::NVFP4, GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::F16, GgmlType::BF16})
    if (gguf::ggml_type_name(type) == name) return type;
  NVFP4LM_FAIL("unknown --gguf-type '{}' (choose nvfp4, q4_0, q8_0, f16 or bf16)", name);
}

GgufModelWriter::GgufModelWriter(const fs::path& out, const std::vector<WeightPlan>& plan, const Qwen3Config& config,
                                 const Tokenizer& tokenizer, GgmlType type, bool overwrite) {
  add_qwen3_gguf_metadata(writer_, config, out.stem().string(), type);
  add_tokenizer_gguf_metadata(writer_, tokenizer, config);
  for (const WeightPlan& weight : plan) {
    Entry entry{weight.name, {gguf_tensor_name(weight.name), choose_type(weight, type), weight.shape}};
    if (entry.spec.type == GgmlType::NVFP4) scale_names_.push_back(gguf::nvfp4_tensor_scale_name(entry.spec.name));
    writer_.add_tensor(entry.spec);
    entries_.push_back(std::move(entry));
  }
  for (const std::string& name : scale_names_) writer_.add_tensor({name, GgmlType::F32, Shape{1}});
  writer_.begin(out, overwrite);
}

GgufModelWriter::~GgufModelWriter() = default;

const GgufModelWriter::Entry& GgufModelWriter::entry(const std::string& hf_name) const {
  for (const Entry& e : entries_)
    if (e.hf_name == hf_name) return e;
  NVFP4LM_FAIL("GGUF: weight '{}' was not planned", hf_name);
}

gguf::GgmlType GgufModelWriter::type_of(const std::string& hf_name) const { return entry(hf_name).spec.type; }

void GgufModelWriter::write_dense(const std::string& hf_name, const Tensor& tensor) {
  const Entry& e = entry(hf_name);
  NVFP4LM_CHECK(e.spec.type != GgmlType::NVFP4, "GGUF: '{}' is planned NVFP4 but written dense", hf_name);
  NVFP4LM_CHECK(tensor.device().is_cpu() && tensor.shape() == e.spec.shape, "GGUF: '{}' is {}, planned {}", hf_name,
                tensor.str(), e.spec.shape.str());
  const int64_t cols = e.spec.shape[e.spec.shape.rank() - 1];
  const int64_t rows = cols > 0 ? e.spec.shape.numel() / cols : 0;
  const Tensor matrix = tensor.contiguous().reshape({rows, cols});
  const bool same_bits = (e.spec.type == GgmlType::BF16 && tensor.dtype() == DType::BF16) ||
                         (e.spec.type == GgmlType::F16 && tensor.dtype() == DType::F16) ||
                         (e.spec.type == GgmlType::F32 && tensor.dtype() == DType::F32);
  const uint64_t row_bytes = gguf::row_bytes(e.spec.type, cols, e.spec.name);
  std::vector<uint8_t> encoded;
  for (int64_t first = 0; first < rows; first += kRowsPerChunk) {
    const int64_t count = std::min(kRowsPerChunk, rows - first);
    const Tensor chunk = matrix.narrow(0, first, count);
    if (same_bits) {
      writer_.write(e.spec.name, chunk.raw(), chunk.nbytes());
      continue;
    }
    Tensor values = Tensor::empty({count, cols}, DType::F32);
    convert_cpu(chunk, values);
    encoded.resize(static_cast<size_t>(row_bytes * static_cast<uint64_t>(count)));
    for (int64_t r = 0; r < count; ++r)
      gguf::encode_row(e.spec.type, values.data<float>() + r * cols, cols, encoded.data() + r * row_bytes);
    writer_.write(e.spec.name, encoded.data(), encoded.size());
  }
}

void GgufModelWriter::write_nvfp4(const std::string& hf_name, const Nvfp4Tensor& q) {
  const Entry& e = entry(hf_name);
  if (e.spec.type != GgmlType::NVFP4) {  // an NVFP4 source written to a dense GGUF type: its values, exactly
    write_dense(hf_name, dequantize_nvfp4(q, DType::F32));
    return;
  }
  NVFP4LM_CHECK(q.device().is_cpu() && q.rows == e.spec.shape[0] && q.cols == e.spec.shape[1],
                "GGUF: NVFP4 weight '{}' is [{}, {}], planned {}", hf_name, q.rows, q.cols, e.spec.shape.str());
  const auto* codes = static_cast<const uint8_t*>(q.codes.contiguous().raw());
  const auto* scales = static_cast<const uint8_t*>(q.block_scales.contiguous().raw());
  const uint64_t row_bytes = gguf::row_bytes(GgmlType::NVFP4, q.cols, e.spec.name);
  std::vector<uint8_t> packed;
  for (int64_t first = 0; first < q.rows; first += kRowsPerChunk) {
    const int64_t count = std::min(kRowsPerChunk, q.rows - first);
    packed.resize(static_cast<size_t>(row_bytes * static_cast<uint64_t>(count)));
    for (int64_t r = first; r < first + count; ++r)
      gguf::repack_nvfp4_row(codes + r * (q.cols / 2), scales + r * (q.cols / 16), q.cols,
                             packed.data() + (r - first) * row_bytes, hf_name.c_str());
    writer_.write(e.spec.name, packed.data(), packed.size());
  }
  tensor_scales_.push_back(q.tensor_scale);
}

void GgufModelWriter::finish() {
  NVFP4LM_CHECK(tensor_scales_.size() == scale_names_.size(), "GGUF: {} of {} NVFP4 weights written",
                tensor_scales_.size(), scale_names_.size());
  for (size_t i = 0; i < scale_names_.size(); ++i) writer_.write(scale_names_[i], &tensor_scales_[i], sizeof(float));
  writer_.finish();
}

}  // namespace nvfp4lm
