// ModelFiles for `.dat` files. Keys follow the HF names; an NVFP4 weight is a pair "<prefix>.qdata" (type 100
// packed E2M1, or 0 u8, [out, in/2]) + "<prefix>.scale" ([out, in/16]) where prefix is either the layer
// ("model.layers.0.self_attn.q_proj") or the weight ("....q_proj.weight"); both map to "<layer>.weight".
// Scales of type 101 (E4M3) or 0 (u8, older files) are E4M3 bytes; float16 (5) / float32 (6) scales come from a
// buggy exporter and are dequantized on load (see model_files.h). The tensor scale is 1 (.dat has none).
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/numeric.h"
#include "io/dat_format.h"
#include "io/model_files_impl.h"
#include "quant/e2m1.h"

namespace nvfp4lm::detail {
namespace {

std::string weight_name_of(std::string_view prefix) {
  return std::string_view(prefix).ends_with(".weight") ? std::string(prefix) : std::string(prefix) + ".weight";
}

struct DatWeight {
  const DatEntry* dense = nullptr;  // raw weight
  const DatEntry* qdata = nullptr;  // NVFP4 codes
  const DatEntry* scale = nullptr;  // NVFP4 block scales
  bool float_scales = false;
};

class DatModelFiles : public ModelFilesBase {
 public:
  explicit DatModelFiles(const ModelLocation& location)
      : ModelFilesBase(location), file_(DatFile::open(location.dat_path)) {
    const std::string where = file_->path().string();
    std::vector<WeightInfo> found;
    for (const DatEntry& entry : file_->entries()) {
      if (std::string_view(entry.key).ends_with(".scale")) {
        const std::string prefix = entry.key.substr(0, entry.key.size() - 6);
        NVFP4LM_CHECK(file_->find(prefix + ".qdata"), "{}: entry {} ('{}') has no matching '{}.qdata'", where,
                      entry.index, entry.key, prefix);
        continue;  // handled with its qdata
      }
      WeightInfo info;
      DatWeight weight;
      if (std::string_view(entry.key).ends_with(".qdata")) {
        const std::string prefix = entry.key.substr(0, entry.key.size() - 6);
        info.name = weight_name_of(prefix);
        weight = quantized(entry, prefix, where);
        const int64_t rows = entry.dims[0], cols = entry.dims[1] * 2;
        info.shape = Shape{rows, cols};
        info.nvfp4 = !weight.float_scales;
        info.dtype = weight.float_scales ? DType::F32 : DType::E2M1x2;
        info.storage = weight.float_scales
                           ? fmt::format("NVFP4 with {} block scales (legacy; dequantized to F32 on load)",
                                         dat_type_name(weight.scale->type))
                           : "NVFP4 (E2M1 codes, E4M3 block scales, tensor scale 1)";
        info.file_bytes = entry.bytes + weight.scale->bytes;
      } else {
        info.name = entry.key;
        weight.dense = &entry;
        info.shape = entry.shape();
        info.dtype = loaded_dtype(entry.type);
        info.storage = std::string(dat_type_name(entry.type));
        info.file_bytes = entry.bytes;
      }
      auto [it, inserted] = weights_by_name_.emplace(info.name, weight);
      NVFP4LM_CHECK(inserted, "{}: entry {} ('{}') stores weight '{}' a second time", where, entry.index, entry.key,
                    info.name);
      found.push_back(std::move(info));
    }
    finalize_weights(std::move(found));
  }

  std::vector<fs::path> data_files() const override { return {file_->path()}; }

  ModelWeight load(const std::string& name) const override {
    at(name);  // Error for unknown names
    const DatWeight& weight = weights_by_name_.at(name);
    ModelWeight result;
    if (weight.dense) {
      result.dense = file_->tensor(*weight.dense);
      return result;
    }
    if (weight.float_scales) {
      result.dense = dequantize_float_scales(weight);
      return result;
    }
    Nvfp4Tensor q;
    q.codes = file_->tensor(*weight.qdata).view_as(DType::E2M1x2);
    q.block_scales = file_->tensor(*weight.scale).view_as(DType::E4M3);
    q.rows = weight.qdata->dims[0];
    q.cols = weight.qdata->dims[1] * 2;
    q.tensor_scale = 1.0f;
    validate_nvfp4(q, fmt::format("{}: '{}'", file_->path().string(), weight.qdata->key));
    result.nvfp4 = q;
    return result;
  }

  void release(const std::string& name) const override {
    const DatWeight& weight = weights_by_name_.at(at(name).name);
    for (const DatEntry* entry : {weight.dense, weight.qdata, weight.scale})
      if (entry) file_->drop_pages(*entry);
  }

 private:
  static DType loaded_dtype(DatType type) {
    switch (type) {
      case DatType::F64:
        return DType::F32;
      case DatType::I16:
        return DType::I32;
      case DatType::Bool:
        return DType::U8;
      case DatType::U8:
        return DType::U8;
      case DatType::I8:
        return DType::I8;
      case DatType::I32:
        return DType::I32;
      case DatType::I64:
        return DType::I64;
      case DatType::F16:
        return DType::F16;
      case DatType::F32:
        return DType::F32;
      case DatType::BF16:
        return DType::BF16;
      case DatType::E2M1x2:
        return DType::E2M1x2;
      case DatType::E4M3:
        return DType::E4M3;
    }
    return DType::U8;
  }

  DatWeight quantized(const DatEntry& qdata, const std::string& prefix, const std::string& where) const {
    DatWeight weight;
    weight.qdata = &qdata;
    const std::string label = fmt::format("{}: entry {} ('{}')", where, qdata.index, qdata.key);
    NVFP4LM_CHECK(qdata.type == DatType::E2M1x2 || qdata.type == DatType::U8,
                  "{}: NVFP4 codes must be type 100 (packed E2M1) or 0 (u8), got {}", label, dat_type_name(qdata.type));
    NVFP4LM_CHECK(qdata.dims.size() == 2 && qdata.dims[0] > 0 && qdata.dims[1] > 0 && qdata.dims[1] % 8 == 0,
                  "{}: NVFP4 codes must be [out, in/2] with in a positive multiple of 16, got {}", label,
                  Shape(qdata.dims).str());
    weight.scale = file_->find(prefix + ".scale");
    NVFP4LM_CHECK(weight.scale, "{}: NVFP4 codes without block scales ('{}.scale' is missing)", label, prefix);
    const DatEntry& scale = *weight.scale;
    const std::string scale_label = fmt::format("{}: entry {} ('{}')", where, scale.index, scale.key);
    NVFP4LM_CHECK(scale.type == DatType::E4M3 || scale.type == DatType::U8 || scale.type == DatType::F16 ||
                      scale.type == DatType::F32,
                  "{}: NVFP4 block scales must be type 101 (E4M3), 0 (u8), 5 (f16) or 6 (f32), got {}", scale_label,
                  dat_type_name(scale.type));
    const int64_t rows = qdata.dims[0], cols = qdata.dims[1] * 2;
    NVFP4LM_CHECK(scale.dims.size() == 2 && scale.dims[0] == rows && scale.dims[1] == cols / 16,
                  "{}: block scales are {} but the codes {} need [{}, {}]", scale_label, Shape(scale.dims).str(),
                  Shape(qdata.dims).str(), rows, cols / 16);
    weight.float_scales = scale.type == DatType::F16 || scale.type == DatType::F32;
    return weight;
  }

  // value = e2m1(code) * scale, in fp32; exact (see model_files.h).
  Tensor dequantize_float_scales(const DatWeight& weight) const {
    const int64_t rows = weight.qdata->dims[0], cols = weight.qdata->dims[1] * 2, col_blocks = cols / 16;
    const uint8_t* codes = file_->bytes_of(*weight.qdata);
    const uint8_t* scales = file_->bytes_of(*weight.scale);
    const bool f16 = weight.scale->type == DatType::F16;
    Tensor out = Tensor::empty({rows, cols}, DType::F32);
    float* values = out.data<float>();
    bool bad_scale = false;
#pragma omp parallel for schedule(static) reduction(|| : bad_scale)
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t b = 0; b < col_blocks; ++b) {
        const int64_t index = r * col_blocks + b;
        float scale;
        if (f16) {
          uint16_t bits;
          std::memcpy(&bits, scales + index * 2, 2);
          scale = f16_to_float(bits);
        } else {
          std::memcpy(&scale, scales + index * 4, 4);
        }
        bad_scale = bad_scale || !(std::fabs(scale) <= FLT_MAX);
        for (int64_t k = 0; k < 16; ++k) {
          const int64_t c = b * 16 + k;
          const uint8_t byte = codes[r * (cols / 2) + c / 2];
          values[r * cols + c] = e2m1_to_float((c % 2) ? e2m1_high_code(byte) : e2m1_low_code(byte)) * scale;
        }
      }
    }
    NVFP4LM_CHECK(!bad_scale, "{}: entry {} ('{}') holds a non-finite block scale; the file is corrupt",
                  file_->path().string(), weight.scale->index, weight.scale->key);
    return out;
  }

  std::shared_ptr<DatFile> file_;
  std::unordered_map<std::string, DatWeight> weights_by_name_;
};

}  // namespace

std::unique_ptr<ModelFiles> open_dat_model(const ModelLocation& location) {
  return std::make_unique<DatModelFiles>(location);
}

}  // namespace nvfp4lm::detail
