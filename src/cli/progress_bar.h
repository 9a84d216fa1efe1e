// A progress bar on stderr for commands that work through a known amount (eval's rows, calibration's tokens):
// "eval [########............] 40% 12/30 rows | 1234 tok/s | 0:05 < 0:08". On a terminal one line is rewritten
// in place; otherwise (a log file, a test) a line is printed at every tenth of the way, so logs stay short.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace nvfp4lm::cli {

// Whether stderr is a terminal: progress is then one line rewritten in place (ProgressBar, the training steps'
// ProgressDisplay, the demo), else printed line by line.
bool stderr_is_terminal();

class ProgressBar {
 public:
  // label: what is being done ("eval"); unit: what `done`/`total` count ("rows").
  ProgressBar(std::string label, std::string unit, bool interactive, std::FILE* out = stderr);
  ~ProgressBar();  // ends an open in-place line
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // done of total units after `seconds`; `rate` (e.g. "1234 tok/s") is shown as given.
  void update(int64_t done, int64_t total, double seconds, const std::string& rate = {});
  void finish();

  // The line for a state (no terminal control characters), for tests.
  std::string line(int64_t done, int64_t total, double seconds, const std::string& rate) const;

 private:
  std::string label_, unit_;
  bool interactive_;
  std::FILE* out_;
  bool line_open_ = false;
  int last_tenth_ = -1;
};

}  // namespace nvfp4lm::cli
