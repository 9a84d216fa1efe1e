// The one NVFP4 plan of a model output, shared by `quantize` (io/quantize_model.h: from a model's files) and
// `export` (train/export.h: from trained master weights): which weights become NVFP4 and which stay dense, in
// what dtype, whether lm_head is untied, and the shape check. The rules:
//  - Only formats that hold NVFP4 weights (io/model_formats.h) get any; the others write every weight dense.
//  - NVFP4: the seven projections (io/weight_names.h is_nvfp4_projection), lm_head with quantize_lm_head, and a
//    weight that is NVFP4 in the source already. Embeddings, norms and anything else stay dense.
//  - A tied lm_head with quantize_lm_head becomes its own NVFP4 lm_head.weight, made from the embedding matrix
//    (which stays dense: lookups need exact rows) and written after the final norm; the output's config.json then
//    says tie_word_embeddings false, so every loader uses the quantized head.
//  - An NVFP4 weight must be [rows, cols] with cols a multiple of 16 (rows too for 16x16 blocks): an Error otherwise.
//  - Dense weights are written in `dense_dtype` when set (export), else as the source stores them (BF16 for a
//    weight that is NVFP4 in the source).
// Each planned weight names its fused tensor-scale group (io/weight_names.h fused_scale_group): the caller picks
// the group's tensor scale (quant/nvfp4_group_scale.h), or 1 where the format stores none.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/model_files.h"
#include "io/model_formats.h"
#include "io/model_writer.h"
#include "quant/nvfp4.h"

namespace nvfp4lm {

struct PlannedWeight {
  WeightPlan out;             // what the writer declares: HF name, shape, NVFP4 or the dense dtype
  std::string source;         // the source weight it is made from (the embedding for an untied lm_head)
  bool source_nvfp4 = false;  // the source holds it as NVFP4 already
  std::string scale_group;    // its fused tensor-scale group
};

struct ExportPlan {
  std::vector<PlannedWeight> weights;  // in output order
  bool lm_head_untied = false;
  std::vector<WeightPlan> writer_plan() const;
};

struct ExportPlanOptions {
  FormatCapabilities format;
  Nvfp4Block block = Nvfp4Block::Row1x16;
  bool quantize_lm_head = false;
  std::optional<DType> dense_dtype = std::nullopt;
};

// sources: the weights to write, in order (a model's weights(), or the masters as dense WeightInfo). `where` starts
// every message (the source model's path, "export").
ExportPlan plan_export(std::span<const WeightInfo> sources, bool tie_word_embeddings, const ExportPlanOptions& options,
                       std::string_view where);

}  // namespace nvfp4lm
