// The PTX probe (ptx_probe.cu): per-lane results of every instruction the emulated device stands in for, on fixed
// pseudo-random inputs. Built with nvcc for a GPU and for the emulated device; their dumps (format_record, one
// line each) compare bit for bit, or within an ulp bound for ex2.approx and mma (scripts/compare_ptx_probe.py).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace nvfp4lm::ptx_probe {

struct Record {
  std::string name;  // instruction family and case, e.g. "shfl.mode3.arg1.width8.mask1"
  int index = 0;
  std::vector<uint32_t> words;  // the results (ex2: input then output)
};

std::vector<Record> run();

// "name index w0 w1 ..." with the words as 8 hex digits.
inline std::string format_record(const Record& record) {
  std::string line = record.name + " " + std::to_string(record.index);
  char word[12];
  for (uint32_t w : record.words) {
    std::snprintf(word, sizeof(word), " %08x", w);
    line += word;
  }
  return line;
}

}  // namespace nvfp4lm::ptx_probe
