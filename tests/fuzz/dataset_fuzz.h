// The body of the training-data fuzz targets (fuzz_dataset_{jsonl,tsv,text}.cpp): the input is a data file of one
// format. It is parsed into records (data/dataset_records.h) when it is valid UTF-8 (the parsers' contract:
// read_dataset_text checks UTF-8 first), then read whole with read_dataset (file written to the scratch directory,
// tokenized by the tiny tokenizer fixture) under options chosen by the input's size, so that each option is
// exercised and an input always replays the same way:
//   bit 0 strict, bit 1 max_tokens 24 (else none), bit 2 raw pair template, bit 3 blank-line text split,
//   bit 4 train only the last assistant turn, bit 5 train on everything, bit 6 the HybridThinking chat template.
// Properties: records of the right kind; samples non-empty with a mask per token, ids in the vocabulary, at most
// max_tokens long; the summary's counts add up.
#pragma once

#include <cstddef>
#include <cstdint>

#include "data/dataset.h"

namespace nvfp4lm::fuzz {

void fuzz_dataset(const uint8_t* data, size_t size, DataFormat format);

}  // namespace nvfp4lm::fuzz
