// See export_plan.h.
#include "io/export_plan.h"

#include "core/error.h"
#include "io/weight_names.h"

namespace nvfp4lm {

std::vector<WeightPlan> ExportPlan::writer_plan() const {
  std::vector<WeightPlan> plan;
  for (const PlannedWeight& weight : weights) plan.push_back(weight.out);
  return plan;
}

ExportPlan plan_export(std::span<const WeightInfo> sources, bool tie_word_embeddings, const ExportPlanOptions& options,
                       std::string_view where) {
  ExportPlan plan;
  auto add = [&](const WeightInfo& source, std::string name, bool nvfp4) {
    NVFP4LM_CHECK(!nvfp4 || nvfp4_shape_fits(source.shape, options.block),
                  "{}: weight '{}' of shape {} cannot be NVFP4 (it needs [rows, cols] with cols a multiple of 16{})",
                  where, source.name, source.shape.str(),
                  options.block == Nvfp4Block::Tile16x16 ? ", and rows too with 16x16 blocks" : "");
    PlannedWeight weight;
    weight.scale_group = fused_scale_group(name);
    weight.out = {std::move(name), source.shape, nvfp4,
                  options.dense_dtype.value_or(source.nvfp4 ? DType::BF16 : source.dtype)};
    weight.source = source.name;
    weight.source_nvfp4 = source.nvfp4;
    plan.weights.push_back(std::move(weight));
  };
  const bool nvfp4_format = options.format.nvfp4_weights;
  for (const WeightInfo& source : sources) {
    const bool lm_head = source.kind == WeightKind::LmHead;
    const bool nvfp4 = nvfp4_format && (source.nvfp4 || (source.kind && is_nvfp4_projection(*source.kind)) ||
                                        (lm_head && options.quantize_lm_head));
    add(source, source.name, nvfp4);
    if (source.kind == WeightKind::FinalNorm && tie_word_embeddings && nvfp4_format && options.quantize_lm_head) {
      const WeightInfo* embedding = nullptr;
      for (const WeightInfo& other : sources)
        if (other.name == kEmbeddingWeightName) embedding = &other;
      NVFP4LM_CHECK(embedding != nullptr, "{}: lm_head is tied to {}, which is missing", where, kEmbeddingWeightName);
      add(*embedding, std::string(kLmHeadWeightName), true);
      plan.lm_head_untied = true;
    }
  }
  return plan;
}

}  // namespace nvfp4lm
