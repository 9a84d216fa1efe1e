// See run_totals.h.
#include "train/run_totals.h"

#include <cmath>

#include "core/json_text.h"

namespace nvfp4lm {

using json = nlohmann::json;

void RunTotals::record(StepMetrics& m) {
  loss_tokens += m.loss_tokens;
  if (m.skipped) ++skipped_steps;
  if (!m.skipped) {
    last_loss = m.loss;
    if (best_step == 0 || m.loss < best_loss) {
      best_loss = m.loss;
      best_step = m.step;
    }
  }
  if (m.eval && std::isfinite(m.eval->loss) && (best_eval_step == 0 || m.eval->loss < best_eval_loss)) {
    best_eval_loss = m.eval->loss;
    best_eval_step = m.step;
    m.eval->best = true;
  }
  metrics_tail.push_back(step_metrics_json(m));
  while (metrics_tail.size() > kMetricsTail) metrics_tail.pop_front();
}

json RunTotals::totals_json(int64_t total_steps) const {
  return {{"total_steps", total_steps},      {"loss_tokens", loss_tokens}, {"skipped_steps", skipped_steps},
          {"best_loss", best_loss},          {"best_step", best_step},     {"best_eval_loss", best_eval_loss},
          {"best_eval_step", best_eval_step}};
}

json RunTotals::metrics_json() const {
  json metrics = json::array();
  for (const json& record : metrics_tail) metrics.push_back(record);
  return metrics;
}

RunTotals RunTotals::from_state(const json& state, const std::string& where) {
  RunTotals totals;
  const json saved = json_field_or(state, "totals", json::object(), where);
  totals.skipped_steps = json_field_or(saved, "skipped_steps", int64_t{0}, where);
  totals.loss_tokens = json_field_or(saved, "loss_tokens", int64_t{0}, where);
  totals.best_loss = json_field_or(saved, "best_loss", 0.0, where);
  totals.best_step = json_field_or(saved, "best_step", int64_t{0}, where);
  totals.best_eval_loss = json_field_or(saved, "best_eval_loss", 0.0, where);
  totals.best_eval_step = json_field_or(saved, "best_eval_step", int64_t{0}, where);
  for (const json& record : json_field_or(state, "metrics", json::array(), where))
    totals.metrics_tail.push_back(record);
  if (!totals.metrics_tail.empty() && totals.metrics_tail.back().contains("loss") &&
      totals.metrics_tail.back()["loss"].is_number())
    totals.last_loss = totals.metrics_tail.back()["loss"].get<double>();
  return totals;
}

}  // namespace nvfp4lm
