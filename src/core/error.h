// Errors. One exception type, nvfp4lm::Error, for everything a user can cause (files, flags, data):
// its message names the file / tensor / argument, what was wrong and, where possible, the fix.
// The CLI prints the message and exits non-zero. Internal invariants use NVFP4LM_ASSERT, which also
// throws (never aborts) so a bug surfaces as a message rather than a core dump.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace nvfp4lm {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A flag value or combination that cannot run, found after CLI11's own parsing: the CLI exits with 2 (usage)
// instead of 1, like CLI11's parse errors.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(message) {}
};

// Raised for internal invariants that do not depend on user input.
[[noreturn]] void internal_error(const char* expr, const char* file, int line, const std::string& detail);

}  // namespace nvfp4lm

// NVFP4LM_CHECK(cond, "file {}: tensor {} has {} bytes, expected {}", path, name, got, want)
#define NVFP4LM_CHECK(cond, ...)                          \
  do {                                                    \
    if (!(cond)) [[unlikely]] {                           \
      throw ::nvfp4lm::Error(::fmt::format(__VA_ARGS__)); \
    }                                                     \
  } while (0)

#define NVFP4LM_FAIL(...) throw ::nvfp4lm::Error(::fmt::format(__VA_ARGS__))

#define NVFP4LM_ASSERT(cond, ...)                                                          \
  do {                                                                                     \
    if (!(cond)) [[unlikely]] {                                                            \
      ::nvfp4lm::internal_error(#cond, __FILE__, __LINE__, ::fmt::format("" __VA_ARGS__)); \
    }                                                                                      \
  } while (0)
