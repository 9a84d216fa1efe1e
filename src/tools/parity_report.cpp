// parity_table and parity_json (tools/parity.h).
#include <fmt/format.h>

#include <string>

#include "tools/parity.h"

namespace nvfp4lm {
namespace {

// A token's text as a quoted, escaped string ("\n" stays visible).
std::string quoted_text(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string divergence_text(const ParityPair& pair) {
  if (pair.diff.first_divergence < 0) return "-";
  return fmt::format("position {}: {} vs {}", pair.diff.first_divergence, quoted_text(pair.token_text),
                     quoted_text(pair.reference_token_text));
}

nlohmann::json pair_json(const ParityPair& pair) {
  nlohmann::json json = {{"path", pair.path},
                         {"against", pair.against},
                         {"class", tolerance_class_name(pair.tolerance_class)},
                         {"tolerance", pair.tolerance},
                         {"max_abs_diff", pair.diff.max_abs_diff},
                         {"max_diff_position", pair.diff.max_diff_position},
                         {"max_abs_reference", pair.diff.max_abs_reference},
                         {"bound", pair.diff.bound(pair.tolerance)},
                         {"non_finite", pair.diff.non_finite},
                         {"positions", pair.diff.positions},
                         {"top1_agree", pair.diff.top1_agree},
                         {"pass", pair.pass()}};
  json["first_divergence"] = nullptr;
  if (pair.diff.first_divergence >= 0) {
    json["first_divergence"] = {{"position", pair.diff.first_divergence},
                                {"token", pair.diff.token},
                                {"text", pair.token_text},
                                {"against_token", pair.diff.reference_token},
                                {"against_text", pair.reference_token_text}};
  }
  return json;
}

nlohmann::json baseline_json(const ParityReport& report) {
  if (report.baseline_file.empty()) return nullptr;
  nlohmann::json moves = nlohmann::json::array();
  for (const BaselineMove& move : report.baseline_moves)
    moves.push_back({{"path", move.path},
                     {"prompt", move.prompt + 1},
                     {"positions", move.positions},
                     {"max_abs_diff", move.max_abs_diff},
                     {"bound", move.bound},
                     {"top1_agree", move.top1_agree},
                     {"first_divergence",
                      move.first_divergence >= 0 ? nlohmann::json(move.first_divergence) : nlohmann::json(nullptr)},
                     {"pass", move.pass}});
  return {{"file", report.baseline_file}, {"moves", moves}, {"notes", report.baseline_notes}};
}

}  // namespace

std::string parity_table(const ParityReport& report) {
  std::string out = fmt::format("parity of {}{}\n", report.model, report.other.empty() ? "" : " and " + report.other);
  out += fmt::format("tolerances (pass: max |Δlogit| <= tolerance x max |reference logit|): {}\n\n",
                     report.tolerances.describe());
  out += fmt::format("{:<14} {:<34} {:<18} {:<48} {}\n", "path", "device", "compute path", "precision", "time");
  for (const ParityPath& path : report.paths) {
    if (!path.skipped.empty()) {
      out += fmt::format("{:<14} skipped: {}\n", path.name, path.skipped);
      continue;
    }
    out += fmt::format("{:<14} {:<34} {:<18} {:<48} {:.2f} s  ({})\n", path.name, path.device, path.compute_path,
                       path.precision, path.seconds, path.description);
  }
  for (size_t p = 0; p < report.prompts.size(); ++p) {
    const ParityPrompt& prompt = report.prompts[p];
    out += fmt::format("\nprompt {}: {} ({} prompt + {} generated tokens)\n", p + 1, quoted_text(prompt.text),
                       prompt.prompt_tokens, prompt.ids.size() - static_cast<size_t>(prompt.prompt_tokens));
    out += fmt::format("  {:<29} {:<17} {:>12} {:>10} {:>9}  {:<4}  {}\n", "pair", "class", "max |Δlogit|", "bound",
                       "top-1", "", "first divergence");
    for (const ParityPair& pair : prompt.pairs) {
      const std::string diff =
          pair.diff.non_finite ? std::string("NaN/inf") : fmt::format("{:.3g}", pair.diff.max_abs_diff);
      out += fmt::format("  {:<29} {:<17} {:>12} {:>10.3g} {:>9}  {:<4}  {}\n", pair.path + " vs " + pair.against,
                         tolerance_class_name(pair.tolerance_class), diff, pair.diff.bound(pair.tolerance),
                         fmt::format("{}/{}", pair.diff.top1_agree, pair.diff.positions), pair.pass() ? "ok" : "FAIL",
                         divergence_text(pair));
    }
  }
  size_t pairs = 0;
  for (const ParityPrompt& prompt : report.prompts) pairs += prompt.pairs.size();
  if (!report.baseline_file.empty()) {
    out += fmt::format("\nagainst the baseline {} (each path's logits at the baseline's top ids of every position):\n",
                       report.baseline_file);
    out += fmt::format("  {:<14} {:>6} {:>12} {:>10} {:>9}  {:<4}  {}\n", "path", "prompt", "max |Δlogit|", "bound",
                       "top-1", "", "first moved argmax");
    for (const BaselineMove& move : report.baseline_moves)
      out += fmt::format("  {:<14} {:>6} {:>12.3g} {:>10.3g} {:>9}  {:<4}  {}\n", move.path, move.prompt + 1,
                         move.max_abs_diff, move.bound, fmt::format("{}/{}", move.top1_agree, move.positions),
                         move.pass ? "ok" : "FAIL",
                         move.first_divergence >= 0 ? fmt::format("position {}", move.first_divergence) : "-");
    for (size_t p = 0; p < report.prompts.size(); ++p)
      out += fmt::format("  prompt {}: the reference's greedy continuation {}\n", p + 1,
                         report.prompts[p].greedy_moved_at < 0
                             ? std::string("is the baseline's")
                             : fmt::format("CHANGED at generated token {}", report.prompts[p].greedy_moved_at + 1));
    for (const std::string& note : report.baseline_notes) out += "  note: " + note + "\n";
    pairs += report.baseline_moves.size() + report.prompts.size();
  }
  out += report.pass() ? fmt::format("\nPASS: {} comparisons within tolerance\n", pairs)
                       : fmt::format("\nFAIL: {} of {} comparisons over tolerance\n", report.failures.size(), pairs);
  return out;
}

nlohmann::json parity_json(const ParityReport& report) {
  nlohmann::json paths = nlohmann::json::array();
  for (const ParityPath& path : report.paths) {
    nlohmann::json json = {{"name", path.name}, {"description", path.description}, {"device", path.device}};
    if (path.skipped.empty()) {
      json["compute_path"] = path.compute_path;
      json["precision"] = path.precision;
      json["seconds"] = path.seconds;
    } else {
      json["skipped"] = path.skipped;
    }
    paths.push_back(std::move(json));
  }
  nlohmann::json prompts = nlohmann::json::array();
  for (const ParityPrompt& prompt : report.prompts) {
    nlohmann::json pairs = nlohmann::json::array();
    for (const ParityPair& pair : prompt.pairs) pairs.push_back(pair_json(pair));
    prompts.push_back({{"text", prompt.text},
                       {"ids", prompt.ids},
                       {"prompt_tokens", prompt.prompt_tokens},
                       {"pairs", std::move(pairs)}});
  }
  nlohmann::json tolerances = nlohmann::json::object();
  for (int i = 0; i < kToleranceClasses; ++i) {
    const auto tolerance_class = static_cast<ToleranceClass>(i);
    tolerances[std::string(tolerance_class_name(tolerance_class))] = report.tolerances.of(tolerance_class);
  }
  return {{"model", report.model},
          {"other", report.other.empty() ? nlohmann::json(nullptr) : nlohmann::json(report.other)},
          {"tolerances", std::move(tolerances)},
          {"paths", std::move(paths)},
          {"prompts", std::move(prompts)},
          {"baseline", baseline_json(report)},
          {"failures", report.failures},
          {"pass", report.pass()}};
}

}  // namespace nvfp4lm
