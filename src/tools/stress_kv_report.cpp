// stress_kv_table and stress_kv_json (tools/stress_kv.h).
#include <fmt/format.h>

#include "tools/stress_kv.h"

namespace nvfp4lm {

std::string stress_kv_table(const StressKvReport& report) {
  std::string out = fmt::format(
      "KV-cache stress on {} ({}; single tokens: {}); caches up to {} tokens; each row of logits vs a full forward, "
      "{} tolerance {:g} x max |reference logit|\n\n",
      report.device, report.compute_path, report.decode_path, report.largest_cache,
      tolerance_class_name(report.tolerance_class), report.tolerance);
  out += fmt::format("{:<68} {:>6} {:>6} {:>7} {:>12} {:>10} {:>8}  {}\n", "case", "cache", "tokens", "checked",
                     "max |Δlogit|", "bound", "time", "result");
  for (const StressCaseResult& c : report.cases) {
    const std::string diff = c.worst.non_finite ? std::string("NaN/inf") : fmt::format("{:.3g}", c.worst.max_abs_diff);
    out += fmt::format("{:<68} {:>6} {:>6} {:>7} {:>12} {:>10.3g} {:>6.2f} s  {}\n", c.name, c.cache_tokens,
                       c.final_tokens, c.checked_rows, diff, c.bound, c.seconds,
                       c.pass() ? std::string("ok") : "FAIL: " + c.failure);
  }
  out += report.pass() ? fmt::format("\nPASS: {} cases\n", report.cases.size())
                       : fmt::format("\nFAIL: {} of {} cases\n", report.failed(), report.cases.size());
  return out;
}

nlohmann::json stress_kv_json(const StressKvReport& report) {
  nlohmann::json cases = nlohmann::json::array();
  for (const StressCaseResult& c : report.cases) {
    cases.push_back({{"name", c.name},
                     {"cache_tokens", c.cache_tokens},
                     {"final_tokens", c.final_tokens},
                     {"checked_rows", c.checked_rows},
                     {"max_abs_diff", c.worst.max_abs_diff},
                     {"max_diff_position", c.worst.max_diff_position},
                     {"bound", c.bound},
                     {"non_finite", c.worst.non_finite},
                     {"seconds", c.seconds},
                     {"pass", c.pass()},
                     {"failure", c.failure}});
  }
  return {{"device", report.device},
          {"compute_path", report.compute_path},
          {"decode_path", report.decode_path},
          {"largest_cache", report.largest_cache},
          {"tolerance_class", tolerance_class_name(report.tolerance_class)},
          {"tolerance", report.tolerance},
          {"cases", std::move(cases)},
          {"failed", report.failed()},
          {"pass", report.pass()}};
}

}  // namespace nvfp4lm
