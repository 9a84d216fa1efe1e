#include "fuzz_util.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <system_error>

#include "core/logging.h"

namespace nvfp4lm::fuzz {
namespace {

// Before any target runs: one OpenMP thread (inputs are tiny; two fuzzers may share two cores), and only errors
// logged (a warning per input would drown the fuzzer's own output). NVFP4LM_LOG still overrides the level.
const bool kProcessSetUp = [] {
  setenv("OMP_NUM_THREADS", "1", /*overwrite=*/0);
  if (!std::getenv("NVFP4LM_LOG")) log::set_level(log::Level::Error);
  return true;
}();

struct ScratchDir {
  fs::path path;
  ScratchDir() {
    const char* base = std::getenv("NVFP4LM_FUZZ_SCRATCH");
    std::error_code ec;
    fs::path root = base && *base ? fs::path(base) : fs::path("/dev/shm");
    if (!fs::is_directory(root, ec)) root = fs::temp_directory_path();
    path = root / ("nvfp4lm-fuzz-" + std::to_string(getpid()));
    fs::remove_all(path, ec);
    fs::create_directories(path, ec);
    if (ec) fail("cannot create the scratch directory " + path.string() + ": " + ec.message());
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

void fail(const std::string& what) {
  std::fprintf(stderr, "FUZZ FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

const fs::path& scratch_dir() {
  static const ScratchDir dir;
  return dir.path;
}

fs::path write_scratch_file(const std::string& relative, std::string_view bytes) {
  const fs::path path = scratch_dir() / relative;
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) fail("cannot write " + path.string());
  return path;
}

fs::path fresh_scratch_dir(const std::string& name) {
  const fs::path path = scratch_dir() / name;
  std::error_code ec;
  fs::remove_all(path, ec);
  fs::create_directories(path, ec);
  if (ec) fail("cannot create " + path.string() + ": " + ec.message());
  return path;
}

fs::path source_path(const std::string& relative) { return fs::path(NVFP4LM_SOURCE_DIR) / relative; }

std::string read_source_file(const std::string& relative) {
  const fs::path path = source_path(relative);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace nvfp4lm::fuzz
