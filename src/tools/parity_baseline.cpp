// See parity_baseline.h.
#include "tools/parity_baseline.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <functional>

#include "core/error.h"
#include "core/json_text.h"
#include "tools/system_report.h"

namespace nvfp4lm {
namespace {

using json = nlohmann::json;

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

json build_json() {
  const SystemReport system = collect_system_report();
  json kernels = json::object();
  for (const auto& [family, variant] : system.cpu_kernels) kernels[family] = variant;
  json gpus = json::array();
  for (const GpuReport& gpu : system.gpus)
    gpus.push_back(fmt::format("cuda:{} {} (sm_{}, driver {}, runtime {})", gpu.index, gpu.name, gpu.sm,
                               gpu.driver_version, gpu.runtime_version));
  return {{"version", system.version},
          {"compiler", system.compiler},
          {"cpu", system.cpu_model},
          {"cpu_kernels", kernels},
          {"cuda_built", system.cuda_built},
          {"cuda_emulation", system.cuda_emulation},
          {"gpus", gpus}};
}

// Reading: each accessor names the file and the field.
struct Reader {
  const fs::path& file;
  const json& at(const json& object, const std::string& key, const std::string& where) const {
    NVFP4LM_CHECK(object.is_object() && object.contains(key), "{}: {} has no \"{}\" (is this a parity baseline?)",
                  file.string(), where, key);
    return object.at(key);
  }
  std::string text(const json& value, const std::string& where) const {
    NVFP4LM_CHECK(value.is_string(), "{}: {} must be a string", file.string(), where);
    return value.get<std::string>();
  }
  int64_t integer(const json& value, const std::string& where, int64_t lo, int64_t hi) const {
    NVFP4LM_CHECK(value.is_number_integer() && value.get<int64_t>() >= lo && value.get<int64_t>() <= hi,
                  "{}: {} must be an integer from {} to {}", file.string(), where, lo, hi);
    return value.get<int64_t>();
  }
  std::vector<int32_t> ids(const json& value, const std::string& where) const {
    NVFP4LM_CHECK(value.is_array(), "{}: {} must be an array of token ids", file.string(), where);
    std::vector<int32_t> out;
    for (size_t i = 0; i < value.size(); ++i)
      out.push_back(static_cast<int32_t>(integer(value[i], fmt::format("{}[{}]", where, i), 0, INT32_MAX)));
    return out;
  }
  std::vector<float> logits(const json& value, const std::string& where) const {
    NVFP4LM_CHECK(value.is_array(), "{}: {} must be an array of logits", file.string(), where);
    std::vector<float> out;
    for (size_t i = 0; i < value.size(); ++i) {
      NVFP4LM_CHECK(value[i].is_number() && std::isfinite(value[i].get<double>()), "{}: {}[{}] must be a finite number",
                    file.string(), where, i);
      out.push_back(value[i].get<float>());
    }
    return out;
  }
};

}  // namespace

ParityTopK top_logits(const float* row, int64_t candidates, int k) {
  // One pass keeping the k largest in order (k is small; no copy of the row's ids): an equal value goes after those
  // already kept, which have lower ids.
  ParityTopK top;
  for (int64_t i = 0; i < candidates; ++i) {
    const float value = row[i];
    if (static_cast<int>(top.logits.size()) == k && !(value > top.logits.back())) continue;
    const auto at = std::upper_bound(top.logits.begin(), top.logits.end(), value, std::greater<float>());
    const auto offset = at - top.logits.begin();
    top.logits.insert(at, value);
    top.ids.insert(top.ids.begin() + offset, static_cast<int32_t>(i));
    if (static_cast<int>(top.logits.size()) > k) {
      top.logits.pop_back();
      top.ids.pop_back();
    }
  }
  return top;
}

json parity_baseline_json(const ParityReport& report, int64_t new_tokens) {
  NVFP4LM_CHECK(!report.prompts.empty() && !report.prompts.front().top_logits.empty(),
                "a parity baseline needs the run's top logits: run parity with ParityOptions::record_top_logits");
  json paths = json::array();
  for (const ParityPath& path : report.paths) {
    if (path.skipped.empty()) {
      paths.push_back({{"name", path.name},
                       {"device", path.device},
                       {"compute_path", path.compute_path},
                       {"precision", path.precision}});
    } else {
      paths.push_back({{"name", path.name}, {"skipped", path.skipped}});
    }
  }
  json prompts = json::array();
  for (const ParityPrompt& prompt : report.prompts) {
    json logits = json::object();
    for (const auto& [path, rows] : prompt.top_logits) {
      json positions = json::array();
      for (const ParityTopK& row : rows) positions.push_back({{"ids", row.ids}, {"logits", row.logits}});
      logits[path] = std::move(positions);
    }
    prompts.push_back(
        {{"text", prompt.text}, {"ids", prompt.ids}, {"prompt_tokens", prompt.prompt_tokens}, {"logits", logits}});
  }
  return {{"nvfp4lm_parity_baseline", kBaselineVersion},
          {"written", utc_now()},
          {"build", build_json()},
          {"model", report.model},
          {"new_tokens", new_tokens},
          {"top_k", kBaselineTopK},
          {"paths", paths},
          {"prompts", prompts}};
}

ParityBaseline read_parity_baseline(const fs::path& path) {
  const json root = read_json_file(path);
  const Reader r{path};
  NVFP4LM_CHECK(root.is_object() && root.contains("nvfp4lm_parity_baseline"),
                "{}: not a parity baseline (no \"nvfp4lm_parity_baseline\"; write one with `nvfp4lm parity "
                "--write-baseline FILE`)",
                path.string());
  const int64_t version = r.integer(root["nvfp4lm_parity_baseline"], "nvfp4lm_parity_baseline", 0, INT32_MAX);
  NVFP4LM_CHECK(version == kBaselineVersion, "{}: a parity baseline of version {}; this nvfp4lm reads version {}",
                path.string(), version, kBaselineVersion);
  ParityBaseline baseline;
  baseline.file = path;
  baseline.written = r.text(r.at(root, "written", "the file"), "\"written\"");
  baseline.model = r.text(r.at(root, "model", "the file"), "\"model\"");
  baseline.build = r.at(root, "build", "the file");
  baseline.new_tokens = r.integer(r.at(root, "new_tokens", "the file"), "\"new_tokens\"", 1, 4096);
  baseline.paths = r.at(root, "paths", "the file");
  const json& prompts = r.at(root, "prompts", "the file");
  NVFP4LM_CHECK(prompts.is_array() && !prompts.empty(), "{}: \"prompts\" must be a non-empty array", path.string());
  for (size_t p = 0; p < prompts.size(); ++p) {
    const std::string where = fmt::format("prompts[{}]", p);
    ParityBaseline::Prompt prompt;
    prompt.text = r.text(r.at(prompts[p], "text", where), where + ".text");
    prompt.ids = r.ids(r.at(prompts[p], "ids", where), where + ".ids");
    prompt.prompt_tokens = r.integer(r.at(prompts[p], "prompt_tokens", where), where + ".prompt_tokens", 1,
                                     static_cast<int64_t>(prompt.ids.size()));
    const json& logits = r.at(prompts[p], "logits", where);
    NVFP4LM_CHECK(logits.is_object(), "{}: {}.logits must be an object (path -> positions)", path.string(), where);
    for (const auto& [name, rows] : logits.items()) {
      const std::string at = where + ".logits." + name;
      NVFP4LM_CHECK(rows.is_array() && rows.size() == prompt.ids.size(),
                    "{}: {} must hold one entry per token ({}), not {}", path.string(), at, prompt.ids.size(),
                    rows.is_array() ? rows.size() : 0);
      std::vector<ParityTopK>& out = prompt.logits[name];
      for (size_t t = 0; t < rows.size(); ++t) {
        const std::string row_at = fmt::format("{}[{}]", at, t);
        ParityTopK top;
        top.ids = r.ids(r.at(rows[t], "ids", row_at), row_at + ".ids");
        top.logits = r.logits(r.at(rows[t], "logits", row_at), row_at + ".logits");
        NVFP4LM_CHECK(!top.ids.empty() && top.ids.size() == top.logits.size(),
                      "{}: {} needs as many logits as ids (at least one)", path.string(), row_at);
        out.push_back(std::move(top));
      }
    }
    baseline.prompts.push_back(std::move(prompt));
  }
  return baseline;
}

void judge_against_baseline(const ParityBaseline& baseline, double tolerance, ParityReport& report) {
  report.baseline_file = baseline.file.string();
  for (size_t p = 0; p < report.prompts.size() && p < baseline.prompts.size(); ++p) {
    ParityPrompt& prompt = report.prompts[p];
    const ParityBaseline::Prompt& before = baseline.prompts[p];
    // The greedy continuation: the predecessor's known-good check.
    const std::vector<int32_t> then(before.ids.begin() + before.prompt_tokens, before.ids.end());
    if (!prompt.greedy_now.empty() && prompt.greedy_now != then) {
      size_t at = 0;
      while (at < then.size() && at < prompt.greedy_now.size() && then[at] == prompt.greedy_now[at]) ++at;
      prompt.greedy_moved_at = static_cast<int64_t>(at);
      report.failures.push_back(fmt::format(
          "baseline: the reference's greedy continuation of prompt {} changed at generated token {} (baseline id {}, "
          "now {})",
          p + 1, at + 1, at < then.size() ? std::to_string(then[at]) : "(end)",
          at < prompt.greedy_now.size() ? std::to_string(prompt.greedy_now[at]) : "(end)"));
    }
    // In the order of this run's paths, then those only the baseline has.
    std::vector<std::string> order;
    for (const ParityPath& path : report.paths)
      if (before.logits.count(path.name)) order.push_back(path.name);
    for (const auto& [path, rows] : before.logits)
      if (std::find(order.begin(), order.end(), path) == order.end()) order.push_back(path);
    for (const std::string& path : order) {
      const std::vector<ParityTopK>& rows = before.logits.at(path);
      const auto now = prompt.at_baseline_ids.find(path);
      if (now == prompt.at_baseline_ids.end()) {
        if (p == 0) report.baseline_notes.push_back(fmt::format("{}: in the baseline, not run now", path));
        continue;
      }
      BaselineMove move;
      move.path = path;
      move.prompt = p;
      move.positions = static_cast<int64_t>(std::min(rows.size(), now->second.size()));
      for (int64_t t = 0; t < move.positions; ++t) {
        const ParityTopK& then_row = rows[static_cast<size_t>(t)];
        const std::vector<float>& now_row = now->second[static_cast<size_t>(t)];
        size_t best = 0;
        for (size_t i = 0; i < then_row.ids.size() && i < now_row.size(); ++i) {
          move.max_abs_diff = std::max(move.max_abs_diff, std::fabs(double(now_row[i]) - double(then_row.logits[i])));
          move.max_abs_baseline = std::max(move.max_abs_baseline, std::fabs(double(then_row.logits[i])));
          if (now_row[i] > now_row[best]) best = i;
        }
        if (best == 0) {
          ++move.top1_agree;
        } else if (move.first_divergence < 0) {
          move.first_divergence = t;
        }
      }
      move.bound = tolerance * move.max_abs_baseline;
      move.pass = move.max_abs_diff <= move.bound && move.first_divergence < 0;
      if (!move.pass)
        report.failures.push_back(fmt::format(
            "baseline: {} (prompt {}) moved: max |Δlogit| {:.3g} (bound {:.3g}), top-1 {}/{}{}", path, p + 1,
            move.max_abs_diff, move.bound, move.top1_agree, move.positions,
            move.first_divergence >= 0 ? fmt::format(", first at position {}", move.first_divergence) : ""));
      report.baseline_moves.push_back(std::move(move));
    }
  }
  for (const ParityPath& path : report.paths)
    if (path.skipped.empty() && baseline.prompts[0].logits.count(path.name) == 0)
      report.baseline_notes.push_back(fmt::format("{}: run now, not in the baseline", path.name));
}

}  // namespace nvfp4lm
