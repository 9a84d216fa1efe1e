#include "common/test_util.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string_view>

#include "io/hf_config.h"
#include "io/synth_model.h"

#if NVFP4LM_HAS_CUDA
#include "core/cuda/runtime.h"
#endif

namespace nvfp4lm::test {

Tensor random_normal(const Shape& shape, Rng& rng, float scale) {
  Tensor t = Tensor::empty(shape, DType::F32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = rng.normal() * scale;
  return t;
}

Tensor random_uniform(const Shape& shape, Rng& rng, float lo, float hi) {
  Tensor t = Tensor::empty(shape, DType::F32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = lo + (hi - lo) * rng.uniform();
  return t;
}

Comparison compare(const std::vector<float>& actual, const std::vector<float>& expected, Tolerance tol) {
  Comparison c;
  double diff_sq = 0, ref_sq = 0;
  for (size_t i = 0; i < expected.size() && i < actual.size(); ++i) {
    double a = actual[i], e = expected[i];
    if (std::isnan(a) != std::isnan(e)) {
      c.nan_found = true;
      ++c.mismatches;
      continue;
    }
    if (std::isnan(a)) continue;
    double err = std::fabs(a - e);
    diff_sq += err * err;
    ref_sq += e * e;
    double rel = err / std::max(std::fabs(e), 1e-30);
    if (err > c.max_abs_error) {
      c.max_abs_error = err;
      c.worst_index = static_cast<int64_t>(i);
    }
    c.max_rel_error = std::max(c.max_rel_error, std::fabs(e) > tol.atol ? rel : 0.0);
    if (err > tol.atol + tol.rtol * std::fabs(e)) ++c.mismatches;
  }
  c.rel_l2_error = ref_sq > 0 ? std::sqrt(diff_sq / ref_sq) : std::sqrt(diff_sq);
  return c;
}

void expect_close(const std::vector<float>& actual, const std::vector<float>& expected, Tolerance tol,
                  const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what << ": element counts differ";
  Comparison c = compare(actual, expected, tol);
  EXPECT_EQ(c.mismatches, 0) << what << ": " << c.mismatches << " of " << expected.size()
                             << " elements outside atol=" << tol.atol << " rtol=" << tol.rtol << "; max abs error "
                             << c.max_abs_error << " at " << c.worst_index << " (actual "
                             << (c.worst_index >= 0 ? actual[static_cast<size_t>(c.worst_index)] : 0.f) << ", expected "
                             << (c.worst_index >= 0 ? expected[static_cast<size_t>(c.worst_index)] : 0.f)
                             << "), max rel error " << c.max_rel_error << ", rel L2 " << c.rel_l2_error
                             << (c.nan_found ? ", NaN mismatch" : "");
}

void expect_close(const Tensor& actual, const Tensor& expected, Tolerance tol, const std::string& what) {
  ASSERT_EQ(actual.shape(), expected.shape())
      << what << ": shape " << actual.shape().str() << " vs " << expected.shape().str();
  expect_close(to_float_vector(actual.to(Device::cpu())), to_float_vector(expected.to(Device::cpu())), tol, what);
}

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "nvfp4lm";
  for (char& ch : name)
    if (ch == '/') ch = '_';
  path_ = fs::temp_directory_path() /
          ("nvfp4lm-test-" + name + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(path_);
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  if (std::getenv("NVFP4LM_KEEP_TEST_DIRS") == nullptr) fs::remove_all(path_, ec);
}

const fs::path& synth_tiny_model(uint64_t seed) {
  static std::mutex mutex;
  static TempDir dir;
  static std::map<uint64_t, fs::path> made;
  const std::lock_guard<std::mutex> lock(mutex);
  auto [it, fresh] = made.try_emplace(seed, dir / ("tiny-" + std::to_string(seed)));
  if (fresh) {
    SynthOptions options;
    options.seed = seed;
    synth_model(qwen3_preset("tiny"), it->second, options);
  }
  return it->second;
}

fs::path fixture_path(const std::string& relative) { return fs::path(NVFP4LM_TEST_DATA_DIR) / relative; }
fs::path source_path(const std::string& relative) { return fs::path(NVFP4LM_SOURCE_DIR) / relative; }

void write_file(const fs::path& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary);
  out << contents;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::vector<nlohmann::json> read_jsonl(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) records.push_back(nlohmann::json::parse(line));
  return records;
}

fs::path installed_npm_package(const std::string& folder, const std::string& package, const fs::path& installed_file,
                               std::string& skip_reason) {
  auto shell_ok = [](const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()) == 0; };
  if (!shell_ok("command -v npm") || !shell_ok("command -v node")) {
    skip_reason = "npm / node not found";
    return {};
  }
  const fs::path dir = fs::path(NVFP4LM_BINARY_PATH).parent_path() / folder;
  if (fs::exists(dir / installed_file)) return dir;
  if (!shell_ok("timeout 60 npm ping")) {
    skip_reason = "the npm registry cannot be reached (npm ping failed)";
    return {};
  }
  fs::create_directories(dir);
  // ctest -j runs test processes side by side, and two npm installs into one folder fail (ENOTEMPTY): the first
  // installs while holding this lock, the others wait on it and then find the package.
  const int lock = ::open((dir / "install.lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  EXPECT_GE(lock, 0) << "cannot open " << (dir / "install.lock");
  if (lock >= 0) ::flock(lock, LOCK_EX);
  int status = 0;
  if (!fs::exists(dir / installed_file)) {
    const fs::path log = dir / "install.log";
    status = std::system(("timeout 600 npm install --prefix " + quoted(dir) +
                          " --no-audit --no-fund --loglevel=error " + package + " >" + quoted(log) + " 2>&1")
                             .c_str());
    EXPECT_EQ(status, 0) << "npm install " << package << " failed although the registry answers: " << read_file(log);
  }
  if (lock >= 0) ::close(lock);  // releases the lock
  return status == 0 ? dir : fs::path();
}

std::vector<std::string> nvfp4lm_argv() {
  std::vector<std::string> words;
  std::istringstream emulator(NVFP4LM_TEST_EMULATOR);  // space-separated words, "" without an emulator
  for (std::string word; emulator >> word;) words.push_back(word);
  words.push_back(NVFP4LM_BINARY_PATH);
  return words;
}

int emulated_time_factor() { return std::string_view(NVFP4LM_TEST_EMULATOR).empty() ? 1 : 20; }

std::string nvfp4lm_command() {
  std::string command;
  for (const std::string& word : nvfp4lm_argv()) command += (command.empty() ? "" : " ") + shell_quoted(word);
  return command;
}

CliResult run_cli(const std::string& args, const std::string& stdin_text, const std::string& environment,
                  const fs::path& working_directory) {
  static std::atomic<int> counter{0};
  fs::path dir =
      fs::temp_directory_path() / ("nvfp4lm-cli-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::create_directories(dir);
  fs::path in = dir / "stdin", out = dir / "stdout", err = dir / "stderr";
  write_file(in, stdin_text);
  std::string command = (working_directory.empty() ? std::string() : "cd '" + working_directory.string() + "' && ") +
                        (environment.empty() ? std::string() : "env " + environment + " ") + nvfp4lm_command() + " " +
                        args + " <'" + in.string() + "' >'" + out.string() + "' 2>'" + err.string() + "'";
  int status = std::system(command.c_str());
  CliResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = read_file(out);
  result.err = read_file(err);
  std::error_code ec;
  fs::remove_all(dir, ec);
  return result;
}

GeneratedAnswer run_generate(const std::string& args) {
  const CliResult result = run_cli("generate " + args);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  GeneratedAnswer answer;
  std::smatch match;
  if (std::regex_search(result.err, match, std::regex("generated ([0-9]+) tokens")))
    answer.tokens = std::stoi(match[1]);
  EXPECT_GE(answer.tokens, 0) << "no token count in: " << result.err;
  answer.text = result.out;
  if (!answer.text.empty() && answer.text.back() == '\n') answer.text.pop_back();
  return answer;
}

void expect_one_line_error(const CliResult& result, std::initializer_list<std::string> parts, const std::string& what) {
  EXPECT_NE(result.exit_code, 0) << what;
  EXPECT_LT(result.exit_code, 128) << what << ": crashed or aborted: " << result.err;
  const size_t at = result.err.find("nvfp4lm: error: ");
  ASSERT_NE(at, std::string::npos) << what << ": " << result.err;
  size_t lines = 0;
  for (size_t e = result.err.find("error: "); e != std::string::npos; e = result.err.find("error: ", e + 1)) ++lines;
  EXPECT_EQ(lines, 1u) << what << ": " << result.err;
  const std::string line = result.err.substr(at);
  EXPECT_EQ(line.find('\n'), line.size() - 1) << what << ": the error must be one line: " << result.err;
  for (const std::string& part : parts)
    EXPECT_NE(line.find(part), std::string::npos) << what << ": '" << part << "' not in: " << line;
}

bool cuda_available() {
#if NVFP4LM_HAS_CUDA
  static const bool available = cuda::device_count() > 0;
  return available;
#else
  return false;
#endif
}

std::optional<std::string> no_gpu_environment() {
  if (cuda_is_emulated()) return std::string("NVFP4LM_EMU_DEVICES=0");
  if (!cuda_available()) return std::string();
  return std::nullopt;
}

}  // namespace nvfp4lm::test
