// Fuzz target: a training data file of prompt<TAB>target lines; see dataset_fuzz.h.
#include "dataset_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nvfp4lm::fuzz::fuzz_dataset(data, size, nvfp4lm::DataFormat::Tsv);
  return 0;
}
