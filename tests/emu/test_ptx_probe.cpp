// The emulator's PTX probe dump must equal the committed fixture, which a GPU run compares with the hardware's
// (scripts/device-check.sh ptx-probe). A change to the emulator's semantics shows here first: regenerate the
// fixture with `build/tests/emu/ptx_probe tests/fixtures/emu/ptx_probe.txt` and say why in the commit.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "emu/ptx_probe.h"

namespace nvfp4lm::test::test_ptx_probe {
namespace {

TEST(PtxProbe, EmulatedDumpIsTheCommittedFixture) {
  const fs::path fixture = fixture_path("emu/ptx_probe.txt");
  std::ifstream in(fixture);
  ASSERT_TRUE(in) << "missing " << fixture;
  std::vector<std::string> expected;
  for (std::string line; std::getline(in, line);) expected.push_back(line);
  const std::vector<ptx_probe::Record> records = ptx_probe::run();
  ASSERT_EQ(records.size(), expected.size()) << "regenerate " << fixture << " (see this file's header)";
  int shown = 0;
  for (size_t i = 0; i < records.size() && shown < 5; ++i) {
    const std::string line = ptx_probe::format_record(records[i]);
    if (line != expected[i]) {
      ADD_FAILURE() << "line " << i + 1 << "\n  emulator: " << line << "\n  fixture:  " << expected[i];
      ++shown;
    }
  }
}

}  // namespace
}  // namespace nvfp4lm::test::test_ptx_probe
