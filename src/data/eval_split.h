// Holding out part of the training data for evaluation (`train --eval-split F`), deterministically and spread over
// the whole file: sample i (0-based, in file order, after rendering and cutting to seq_len) is held out when
// floor((i + 1) * F) > floor(i * F), i.e. every 1/F-th sample, floor(n * F) in all. No random draw: the split depends
// only on the data and F, so a resumed run (and any later `nvfp4lm eval` of it) sees the same split, and text cut
// into consecutive pieces gives up evenly spaced pieces rather than its end.
#pragma once

#include <vector>

#include "data/sample.h"

namespace nvfp4lm {

// Moves the held-out samples out of `samples` (the rest keep their order) and returns them in file order. Error
// when the fraction holds out nothing or leaves nothing to train on.
// Whether item `index` (0-based, in file order) is held out at `fraction`: the rule above, for anything split
// alongside samples (GRPO's prompts and their records).
bool held_out_at(size_t index, double fraction);

// group > 1: samples come in groups of that many consecutive ones (preference pairs), held out or kept together; the
// rule above then numbers groups.
std::vector<Sample> hold_out_samples(std::vector<Sample>& samples, double fraction, size_t group = 1);

}  // namespace nvfp4lm
