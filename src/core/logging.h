// Logging to stderr with a level (NVFP4LM_LOG=debug|info|warn|error, default info). stdout stays free
// for command output (generated text, JSON). One of the two pieces of global mutable state we allow.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace nvfp4lm::log {

enum class Level { Debug = 0, Info = 1, Warn = 2, Error = 3, Off = 4 };

Level level();
void set_level(Level level);
// Parses "debug", "info", "warn", "error", "off"; throws Error on anything else.
Level parse_level(std::string_view name);
void write(Level level, std::string_view message);

template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::Debug) write(Level::Debug, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::Info) write(Level::Info, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::Warn) write(Level::Warn, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::Error) write(Level::Error, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace nvfp4lm::log

namespace nvfp4lm {

// Raises the log level from info to warn for its lifetime (library steps that log what a header line says).
class QuietInfoLogs {
 public:
  QuietInfoLogs() : saved_(log::level()) {
    if (saved_ == log::Level::Info) log::set_level(log::Level::Warn);
  }
  ~QuietInfoLogs() { log::set_level(saved_); }
  QuietInfoLogs(const QuietInfoLogs&) = delete;
  QuietInfoLogs& operator=(const QuietInfoLogs&) = delete;

 private:
  log::Level saved_;
};

}  // namespace nvfp4lm
