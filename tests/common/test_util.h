// Shared helpers for nvfp4lm tests: random tensors, closeness checks that print max abs/rel error,
// per-dtype tolerances (stated once, here), temporary directories, fixtures, running the CLI, GPU skips.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <initializer_list>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace nvfp4lm::test {

namespace fs = std::filesystem;

// Tolerances for comparing an implementation with its reference, by the precision it computes in.
struct Tolerance {
  float atol;
  float rtol;
};
// AddressSanitizer builds (make test-asan, the fuzz build) run 3-20x slower and add shadow memory and redzones to
// every allocation: tests that judge wall time or peak RSS relax or skip those judgements there; their functional
// checks still run.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitizerBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitizerBuild = true;
#else
inline constexpr bool kSanitizerBuild = false;
#endif
#else
inline constexpr bool kSanitizerBuild = false;
#endif

inline constexpr Tolerance kF32Tol{1e-5f, 1e-4f};   // fp32 vs fp32 (different summation orders)
inline constexpr Tolerance kBF16Tol{2e-2f, 2e-2f};  // bf16 activations, fp32 accumulation vs fp32 reference

// F32 CPU tensor with N(0, scale^2) entries.
Tensor random_normal(const Shape& shape, Rng& rng, float scale = 1.0f);
// F32 CPU tensor with U(lo, hi) entries.
Tensor random_uniform(const Shape& shape, Rng& rng, float lo, float hi);

struct Comparison {
  double max_abs_error = 0;
  double max_rel_error = 0;  // |a-e| / max(|e|, tiny) at the worst element
  double rel_l2_error = 0;   // ||a-e|| / ||e||
  int64_t worst_index = -1;
  int64_t mismatches = 0;  // elements outside atol + rtol*|e|
  bool nan_found = false;
};
Comparison compare(const std::vector<float>& actual, const std::vector<float>& expected, Tolerance tol);

// Adds a gtest failure (with the error statistics) when any element is outside atol + rtol*|expected|.
void expect_close(const Tensor& actual, const Tensor& expected, Tolerance tol, const std::string& what);
void expect_close(const std::vector<float>& actual, const std::vector<float>& expected, Tolerance tol,
                  const std::string& what);

// A fresh, empty directory removed when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

// A random model of the `tiny` preset (io/synth_model.h: Qwen3 shapes, 151936-token vocabulary, the bundled Qwen3
// tokenizer) with this seed, synthesised once per seed per test process into a directory removed at exit.
const fs::path& synth_tiny_model(uint64_t seed);

fs::path fixture_path(const std::string& relative);
fs::path source_path(const std::string& relative);  // relative to the repository root

// `path` in single quotes, for the shell command lines of run_cli (paths here never contain a quote).
inline std::string quoted(const fs::path& path) {
  std::string text = "'";  // built with += : GCC 12 gives a false -Wrestrict warning for "'" + std::string + "'"
  text += path.string();
  text += '\'';
  return text;
}

// Any text as one shell word: single-quoted, with each ' written as '\''.
inline std::string shell_quoted(const std::string& text) {
  std::string word = "'";
  for (char c : text) {
    if (c == '\'') {
      word += "'\\''";
    } else {
      word += c;
    }
  }
  word += '\'';
  return word;
}

// The words that start the nvfp4lm executable: its path, after the emulator of a cross build (CMake's
// CMAKE_CROSSCOMPILING_EMULATOR, e.g. qemu-aarch64 for an ARM64 build tested on amd64; NVFP4LM_TEST_EMULATOR) when
// there is one. nvfp4lm_command() is the same as shell words. Every test that starts the executable starts it so.
std::vector<std::string> nvfp4lm_argv();
std::string nvfp4lm_command();
// How much longer a time limit on work the executable does gets under that emulator: 1 natively, 20 under qemu-user
// (which computes floating point in software: a served request of the tiny model takes ~30x its native time).
int emulated_time_factor();

// <build>/<folder> with the npm package `package` ("openai@7", "@huggingface/jinja@0.5.11") installed in it, installed
// on first use (a dev-only dependency of the tests that check against it); `installed_file` (relative to the folder)
// says it is there. An empty path with `skip_reason` set when npm / node are missing or the registry cannot be
// reached; a failed install is a test failure. Test processes running side by side install once: the others wait.
fs::path installed_npm_package(const std::string& folder, const std::string& package, const fs::path& installed_file,
                               std::string& skip_reason);

// Runs the nvfp4lm executable with `args` (a shell-quoted argument string), optional stdin text.
struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
// `environment` ("NAME=value ...", may be empty) is set for the command only.
CliResult run_cli(const std::string& args, const std::string& stdin_text = "", const std::string& environment = "",
                  const fs::path& working_directory = {});

// `nvfp4lm generate ARGS`, which must succeed: the answer (stdout without its final newline) and the number of
// generated tokens from the statistics line on stderr (-1, and a test failure, when either is missing).
struct GeneratedAnswer {
  std::string text;
  int tokens = -1;
};
GeneratedAnswer run_generate(const std::string& args);

// A failed command, neither crashed nor aborted, whose stderr ends in exactly one error line
// ("nvfp4lm: error: ...") containing every part. `what` prefixes the failure messages.
void expect_one_line_error(const CliResult& result, std::initializer_list<std::string> parts,
                           const std::string& what = "");

void write_file(const fs::path& path, const std::string& contents);
std::string read_file(const fs::path& path);
// One JSON value a line (blank lines skipped); fails the test (and returns what it read) when the file cannot be read.
std::vector<nlohmann::json> read_jsonl(const fs::path& path);

bool cuda_available();

// The environment for run_cli under which nvfp4lm finds no GPU, to test its no-GPU paths: "" where there is none
// anyway, "NVFP4LM_EMU_DEVICES=0" in the emulated CUDA build (which switches the emulated device off), and
// nullopt where a real GPU is present (those tests then skip).
std::optional<std::string> no_gpu_environment();

// Runs `action`, expects an nvfp4lm::Error (any other exception or none is a failure), returns its message.
inline std::string error_message(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected nvfp4lm::Error, got another exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << "expected an nvfp4lm::Error, got none";
  return {};
}

// Expects an Error whose message contains every one of `parts` and is a single line.
inline void expect_error(const std::function<void()>& action, std::initializer_list<std::string> parts) {
  const std::string message = error_message(action);
  for (const auto& part : parts)
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << "multi-line error: " << message;
}

}  // namespace nvfp4lm::test

#define NVFP4LM_SKIP_WITHOUT_GPU()                                           \
  do {                                                                       \
    if (!::nvfp4lm::test::cuda_available()) GTEST_SKIP() << "no usable GPU"; \
  } while (0)
