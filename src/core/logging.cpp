#include "core/logging.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "core/error.h"

namespace nvfp4lm::log {
namespace {

Level initial_level() {
  const char* env = std::getenv("NVFP4LM_LOG");
  if (env == nullptr || *env == '\0') return Level::Info;
  try {
    return parse_level(env);
  } catch (const Error&) {
    std::fprintf(stderr, "[warn] NVFP4LM_LOG=%s is not a level (debug|info|warn|error|off); using info\n", env);
    return Level::Info;
  }
}

std::atomic<Level>& current() {
  static std::atomic<Level> value{initial_level()};
  return value;
}

std::mutex& output_mutex() {
  static std::mutex mutex;
  return mutex;
}

}  // namespace

Level level() { return current().load(std::memory_order_relaxed); }
void set_level(Level value) { current().store(value, std::memory_order_relaxed); }

Level parse_level(std::string_view name) {
  if (name == "debug") return Level::Debug;
  if (name == "info") return Level::Info;
  if (name == "warn") return Level::Warn;
  if (name == "error") return Level::Error;
  if (name == "off") return Level::Off;
  NVFP4LM_FAIL("unknown log level '{}': use debug, info, warn, error or off", name);
}

void write(Level lvl, std::string_view message) {
  static constexpr const char* kTags[] = {"debug", "info", "warn", "error", ""};
  std::lock_guard lock(output_mutex());
  std::fprintf(stderr, "[%s] %.*s\n", kTags[static_cast<int>(lvl)], static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
}

}  // namespace nvfp4lm::log
