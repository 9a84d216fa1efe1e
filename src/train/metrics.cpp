// See metrics.h.
#include "train/metrics.h"

#include <cmath>
#include <sstream>

#include "core/error.h"
#include "core/json_text.h"
#include "core/memory.h"

namespace nvfp4lm {
namespace {

using json = nlohmann::json;

json finite_or_null(double value) { return std::isfinite(value) ? json(value) : json(nullptr); }

void add_preference(json& out, const PreferenceMetrics& p, const std::string& prefix) {
  out[prefix + "pairs"] = p.pairs;
  out[prefix + "rewards/chosen"] = finite_or_null(p.chosen_reward);
  out[prefix + "rewards/rejected"] = finite_or_null(p.rejected_reward);
  out[prefix + "rewards/margins"] = finite_or_null(p.margin);
  out[prefix + "rewards/accuracies"] = p.accuracy;
  out[prefix + "logps/chosen"] = finite_or_null(p.chosen_logp);
  out[prefix + "logps/rejected"] = finite_or_null(p.rejected_logp);
}

void add_grpo(json& out, const GrpoMetrics& g, const std::string& prefix) {
  out[prefix + "completions"] = g.completions;
  out[prefix + "reward"] = finite_or_null(g.reward);
  out[prefix + "reward_std"] = finite_or_null(g.reward_std);
  out[prefix + "completions/mean_length"] = g.completion_length;
  out[prefix + "completions/ended"] = g.ended;
  if (g.entropy) out[prefix + "entropy"] = finite_or_null(*g.entropy);
  if (prefix.empty()) {
    out["clip_ratio"] = g.clip_ratio;
    if (g.kl) out["kl"] = finite_or_null(*g.kl);
    out["rollout_s"] = g.rollout_seconds;
    out["rollout_tokens_per_s"] = g.rollout_tokens_per_second;
    out["score_s"] = g.score_seconds;
    out["train_s"] = g.train_seconds;
    out["train_tokens_per_s"] = g.train_tokens_per_second;
  }
}

}  // namespace

json step_metrics_json(const StepMetrics& m) {
  json out = {{"step", m.step},
              {"total_steps", m.total_steps},
              {"epoch", m.epoch},
              {"loss", finite_or_null(m.loss)},
              {"token_accuracy", m.token_accuracy},
              {"loss_tokens", m.loss_tokens},
              {"input_tokens", m.input_tokens},
              {"micro_batches", m.micro_batches},
              {"lr", m.lr},
              {"grad_norm", finite_or_null(m.grad_norm)},
              {"clip_coefficient", m.clip_coefficient},
              {"skipped", m.skipped},
              {"step_s", m.step_seconds},
              {"tokens_per_s", m.tokens_per_second},
              {"elapsed_s", m.elapsed_seconds},
              {"eta_s", m.eta_seconds},
              {"device_bytes", m.device_bytes},
              {"device_peak_bytes", m.device_peak_bytes},
              {"rss_bytes", m.rss_bytes}};
  if (m.skipped) out["skip_reason"] = m.skip_reason;
  if (m.kl) out["kl"] = finite_or_null(*m.kl);
  if (m.agreement) out["teacher_agreement"] = *m.agreement;
  if (m.preference) add_preference(out, *m.preference, "");
  if (m.grpo) add_grpo(out, *m.grpo, "");
  if (m.eval) {
    out["eval_loss"] = finite_or_null(m.eval->loss);
    if (!m.eval->preference && !m.eval->grpo) out["eval_perplexity"] = finite_or_null(m.eval->perplexity);
    if (m.eval->grpo) add_grpo(out, *m.eval->grpo, "eval_");
    if (m.eval->preference) add_preference(out, *m.eval->preference, "eval_");
    out["eval_token_accuracy"] = m.eval->token_accuracy;
    out["eval_tokens"] = m.eval->tokens;
    out["eval_s"] = m.eval->seconds;
    out["eval_best"] = m.eval->best;
    if (m.eval->kl) out["eval_kl"] = finite_or_null(*m.eval->kl);
    if (m.eval->agreement) out["eval_teacher_agreement"] = *m.eval->agreement;
  }
  return out;
}

MetricsFile::MetricsFile(const fs::path& path, int64_t keep_through_step, bool replace) : path_(path) {
  std::error_code ec;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  std::string kept;
  if (keep_through_step >= 0 && fs::exists(path, ec)) {
    std::istringstream lines(read_text_file(path));
    std::string line;
    while (std::getline(lines, line)) {
      if (line.empty()) continue;
      const json record = try_parse_json(line).value;
      // A torn last line (a crash mid-write) or a step after the checkpoint is dropped.
      if (!record.is_object() || !record.contains("step") || !record["step"].is_number_integer()) continue;
      if (record["step"].get<int64_t>() <= keep_through_step) kept += line + "\n";
    }
  }
  write_file_atomic(path, kept, replace);
  file_ = std::fopen(path.c_str(), "ab");
  NVFP4LM_CHECK(file_ != nullptr, "cannot open the metrics file {} for writing", path.string());
}

MetricsFile::~MetricsFile() {
  if (file_) std::fclose(file_);
}

void MetricsFile::append(const StepMetrics& metrics) {
  const std::string line = step_metrics_json(metrics).dump() + "\n";
  const bool ok = std::fwrite(line.data(), 1, line.size(), file_) == line.size() && std::fflush(file_) == 0;
  NVFP4LM_CHECK(ok, "cannot write to the metrics file {} (disk full?)", path_.string());
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto total = static_cast<int64_t>(std::llround(seconds));
  const int64_t hours = total / 3600, minutes = (total / 60) % 60, secs = total % 60;
  return hours > 0 ? fmt::format("{}:{:02}:{:02}", hours, minutes, secs) : fmt::format("{}:{:02}", minutes, secs);
}

std::string format_step_line(const StepMetrics& m, Device device) {
  const int width = static_cast<int>(std::to_string(m.total_steps).size());
  std::string line = fmt::format("step {:>{}}/{} | epoch {:.2f} | ", m.step, width, m.total_steps, m.epoch);
  if (m.skipped) {
    line += fmt::format("SKIPPED ({}) | ", m.skip_reason);
  } else {
    line += fmt::format("loss {:.4f} | acc {:5.1f}% | ", m.loss, 100.0 * m.token_accuracy);
    if (m.kl) line += fmt::format("kl {:.4f} | agree {:5.1f}% | ", *m.kl, 100.0 * m.agreement.value_or(0));
    if (m.preference)
      line +=
          fmt::format("margin {:.4f} | pairs right {:5.1f}% | ", m.preference->margin, 100.0 * m.preference->accuracy);
    if (m.grpo)
      line += fmt::format("reward {:.3f} ± {:.3f} | {:.1f} tokens{}{} | rollout {:.1f} s ({:.0f} tok/s) | ",
                          m.grpo->reward, m.grpo->reward_std, m.grpo->completion_length,
                          m.grpo->entropy ? fmt::format(", entropy {:.2f}", *m.grpo->entropy) : "",
                          m.grpo->kl ? fmt::format(" | kl {:.4f}", *m.grpo->kl) : "", m.grpo->rollout_seconds,
                          m.grpo->rollout_tokens_per_second);
  }
  line += fmt::format("lr {:.2e} | gnorm {:.3g} | {:.0f} tok/s | {} < {} | mem {:.2f} GiB {}", m.lr, m.grad_norm,
                      m.tokens_per_second, format_duration(m.elapsed_seconds), format_duration(m.eta_seconds),
                      to_gib(m.device_bytes), device.is_cpu() ? "(cpu tensors)" : device.label());
  if (m.eval && m.eval->grpo)
    line += fmt::format(" | eval reward {:.3f}{}", m.eval->grpo->reward, m.eval->best ? " (best)" : "");
  else if (m.eval && m.eval->preference)
    line +=
        fmt::format(" | eval loss {:.4f} margin {:.4f} pairs right {:.1f}%{}", m.eval->loss, m.eval->preference->margin,
                    100.0 * m.eval->preference->accuracy, m.eval->best ? " (best)" : "");
  else if (m.eval)
    line += fmt::format(" | eval loss {:.4f} ppl {:.2f}{}{}", m.eval->loss, m.eval->perplexity,
                        m.eval->kl ? fmt::format(" kl {:.4f}", *m.eval->kl) : "", m.eval->best ? " (best)" : "");
  return line;
}

ProgressDisplay::ProgressDisplay(Device device, bool interactive, std::FILE* out)
    : device_(device), interactive_(interactive), out_(out) {}

ProgressDisplay::~ProgressDisplay() { finish(); }

void ProgressDisplay::update(const StepMetrics& metrics) {
  const std::string line = format_step_line(metrics, device_);
  if (interactive_) {
    // Skipped steps stay on screen: they are news, not progress.
    std::fprintf(out_, "\r%s\x1b[K%s", line.c_str(), metrics.skipped ? "\n" : "");
    line_open_ = !metrics.skipped;
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

void ProgressDisplay::finish() {
  if (line_open_) {
    std::fputc('\n', out_);
    std::fflush(out_);
    line_open_ = false;
  }
}

json memory_report_json(Device device) {
  const MemoryTracker& tracker = MemoryTracker::instance();
  json phases = json::array();
  for (const PhasePeak& peak : tracker.phase_peaks()) {
    phases.push_back({{"phase", peak.phase},
                      {"device", peak.device.str()},
                      {"peak_bytes", peak.peak_bytes},
                      {"peak_gib", to_gib(peak.peak_bytes)}});
  }
  json report = {{"device", device.str()},
                 {"phases", phases},
                 {"device_peak_bytes", tracker.peak_bytes(device)},
                 {"device_limit_bytes", tracker.limit_bytes(device)},
                 {"host_peak_rss_bytes", peak_rss_bytes()}};
  // A GPU whose memory is the host's (GB10): the peak of the CPU's and the GPU's tensors together, what
  // --max-memory limits there.
  if (tracker.shares_with_host(device)) report["unified_peak_bytes"] = tracker.shared_peak_bytes();
  return report;
}

std::string format_memory_report(const json& report) {
  std::string text;
  for (const json& phase : report["phases"]) {
    if (!text.empty()) text += ", ";
    text += fmt::format("{} {:.2f} GiB", phase["phase"].get<std::string>(), phase["peak_gib"].get<double>());
    if (phase["device"] != report["device"]) text += " (" + phase["device"].get<std::string>() + ")";
  }
  std::string optimizer;
  if (report.contains("optimizer_state_bytes")) {
    optimizer = fmt::format("; optimizer state {:.2f} GiB", to_gib(report["optimizer_state_bytes"].get<size_t>()));
    if (report.contains("ranks")) {  // a data-parallel run: every rank's shard
      std::string shards;
      for (const json& rank : report["ranks"])
        shards +=
            fmt::format("{}{:.2f}", shards.empty() ? "" : " / ", to_gib(rank["optimizer_state_bytes"].get<size_t>()));
      optimizer += fmt::format(" on this rank (ranks 0..{}: {} GiB)", report["ranks"].size() - 1, shards);
    }
  }
  std::string unified;
  if (report.contains("unified_peak_bytes"))
    unified = fmt::format(
        "; unified memory (the GPU's memory is the host's): CPU and GPU tensors peak {:.2f} GiB "
        "together",
        to_gib(report["unified_peak_bytes"].get<size_t>()));
  return fmt::format("peak memory by phase ({} tensors): {}; host peak RSS {:.2f} GiB{}{}",
                     report["device"].get<std::string>(), text.empty() ? "none" : text,
                     to_gib(report["host_peak_rss_bytes"].get<size_t>()), unified, optimizer);
}

}  // namespace nvfp4lm
