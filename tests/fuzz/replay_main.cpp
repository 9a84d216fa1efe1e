// Replays a fuzz target's corpus as a plain test, without libFuzzer (any compiler, no sanitizer needed):
//   fuzz_replay_<target> DIR_OR_FILE...
// runs LLVMFuzzerTestOneInput once on every regular file given or found (recursively, in name order) under the
// directories given; directories that do not exist are skipped (tests/fuzz/regressions/<target>/ is optional).
// A finding aborts the process (fuzz_util.h), so ctest reports the test as failed; the file being run is printed
// first. Fails too when no input at all was found (a wrong path would otherwise pass silently).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg = argv[i];
    std::error_code ec;
    if (fs::is_regular_file(arg, ec)) {
      inputs.push_back(arg);
    } else if (fs::is_directory(arg, ec)) {
      for (const auto& entry : fs::recursive_directory_iterator(arg)) {
        if (entry.is_regular_file()) inputs.push_back(entry.path());
      }
    }
  }
  std::sort(inputs.begin(), inputs.end());
  if (inputs.empty()) {
    std::fprintf(stderr, "fuzz replay: no input files under the given paths\n");
    return 1;
  }
  for (const fs::path& input : inputs) {
    std::fprintf(stderr, "fuzz replay: %s\n", input.c_str());
    std::ifstream in(input, std::ios::binary);
    const std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    // A copy of exactly `size` bytes, as libFuzzer passes it (ASan then sees reads past the end).
    std::vector<uint8_t> data(bytes.begin(), bytes.end());
    LLVMFuzzerTestOneInput(data.empty() ? nullptr : data.data(), data.size());
  }
  std::fprintf(stderr, "fuzz replay: %zu inputs passed\n", inputs.size());
  return 0;
}
