// Shared by the fuzz targets (tests/fuzz/fuzz_*.cpp). Each target defines LLVMFuzzerTestOneInput and is built
// two ways (tests/fuzz/CMakeLists.txt):
//   - fuzz_<target>: linked with libFuzzer (-DNVFP4LM_FUZZ=ON, clang, ASan+UBSan), run by `make fuzz`;
//   - fuzz_replay_<target>: linked with replay_main.cpp by any compiler, a default-suite test (label "fuzz") that
//     runs every file of tests/fuzz/corpus/<target>/ and tests/fuzz/regressions/<target>/ once.
//
// The contract a target checks: bad input ends in nvfp4lm::Error (expect_error_only swallows exactly that), and
// nothing else. Any other exception escaping (a std::out_of_range, nlohmann's type_error, ...), an Error raised by
// an internal invariant (NVFP4LM_ASSERT: user input must never reach one), a crash, a hang, a leak, a sanitizer
// report or a broken FUZZ_CHECK property is a finding: the process aborts and libFuzzer keeps the input.
//
// Targets whose API takes a path write the input into a per-process scratch directory on tmpfs
// (/dev/shm/nvfp4lm-fuzz-<pid>, or $NVFP4LM_FUZZ_SCRATCH/<pid>), removed at a normal exit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/error.h"

namespace nvfp4lm::fuzz {

namespace fs = std::filesystem;

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Prints `what` and aborts (libFuzzer saves the input as a crash; the replay test fails).
[[noreturn]] void fail(const std::string& what);

// Runs `body`; an nvfp4lm::Error is the expected end for bad input, unless it reports an internal invariant.
// Returns true when `body` finished without an Error.
template <typename Body>
bool expect_error_only(Body&& body) {
  try {
    body();
    return true;
  } catch (const Error& e) {
    const std::string_view message = e.what();
    if (message.starts_with("internal error at "))
      fail(std::string("user input reached an internal check: ") + e.what());
    return false;
  }
}

// The per-process scratch directory (created on first use).
const fs::path& scratch_dir();
// Writes `bytes` to scratch_dir() / relative (creating parent directories, replacing the file); returns the path.
fs::path write_scratch_file(const std::string& relative, std::string_view bytes);
// scratch_dir() / name, created empty (its old contents removed).
fs::path fresh_scratch_dir(const std::string& name);

// A file of the source tree (NVFP4LM_SOURCE_DIR), read whole; fails the process when it cannot be read.
std::string read_source_file(const std::string& relative);
fs::path source_path(const std::string& relative);

}  // namespace nvfp4lm::fuzz

// FUZZ_CHECK(cond, "what went wrong {}", value): a property every input must keep.
#define FUZZ_CHECK(cond, ...)                                                                  \
  do {                                                                                         \
    if (!(cond)) [[unlikely]] {                                                                \
      ::nvfp4lm::fuzz::fail(::fmt::format("{}:{}: `{}` failed: ", __FILE__, __LINE__, #cond) + \
                            ::fmt::format(__VA_ARGS__));                                       \
    }                                                                                          \
  } while (0)
