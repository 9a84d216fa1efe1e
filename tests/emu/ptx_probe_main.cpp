// `ptx_probe [FILE]`: writes the PTX probe's dump (ptx_probe.h) to FILE or stdout. On a GPU machine
// (scripts/device-check.sh ptx-probe) its output is compared with tests/fixtures/emu/ptx_probe.txt, the emulator's.
#include <exception>
#include <fstream>
#include <iostream>

#include "emu/ptx_probe.h"

int main(int argc, char** argv) {
  try {
    std::ofstream file;
    if (argc > 1) file.open(argv[1]);
    std::ostream& out = argc > 1 ? static_cast<std::ostream&>(file) : std::cout;
    for (const auto& record : nvfp4lm::ptx_probe::run()) out << nvfp4lm::ptx_probe::format_record(record) << "\n";
    return out ? 0 : 1;
  } catch (const std::exception& error) {
    std::cerr << "ptx_probe: " << error.what() << "\n";
    return 1;
  }
}
