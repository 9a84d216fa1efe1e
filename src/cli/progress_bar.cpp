// See progress_bar.h.
#include "cli/progress_bar.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

#include "train/metrics.h"

namespace nvfp4lm::cli {
namespace {

constexpr int kBarWidth = 24;

}  // namespace

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

ProgressBar::ProgressBar(std::string label, std::string unit, bool interactive, std::FILE* out)
    : label_(std::move(label)), unit_(std::move(unit)), interactive_(interactive), out_(out) {}

ProgressBar::~ProgressBar() { finish(); }

std::string ProgressBar::line(int64_t done, int64_t total, double seconds, const std::string& rate) const {
  const double fraction =
      total > 0 ? std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0) : 1.0;
  const int filled = static_cast<int>(fraction * kBarWidth);
  const double eta = fraction > 0 ? seconds / fraction - seconds : 0;
  std::string text =
      fmt::format("{} [{}{}] {:3.0f}% {}/{} {}", label_, std::string(static_cast<size_t>(filled), '#'),
                  std::string(static_cast<size_t>(kBarWidth - filled), '.'), 100.0 * fraction, done, total, unit_);
  if (!rate.empty()) text += " | " + rate;
  text += fmt::format(" | {} < {}", format_duration(seconds), format_duration(eta));
  return text;
}

void ProgressBar::update(int64_t done, int64_t total, double seconds, const std::string& rate) {
  const std::string text = line(done, total, seconds, rate);
  if (interactive_) {
    std::fprintf(out_, "\r%s\x1b[K", text.c_str());
    line_open_ = true;
  } else {
    const int tenth = total > 0 ? static_cast<int>(10 * done / total) : 10;
    if (tenth == last_tenth_) return;
    last_tenth_ = tenth;
    std::fprintf(out_, "%s\n", text.c_str());
  }
  std::fflush(out_);
}

void ProgressBar::finish() {
  if (!line_open_) return;
  std::fputc('\n', out_);
  std::fflush(out_);
  line_open_ = false;
}

}  // namespace nvfp4lm::cli
