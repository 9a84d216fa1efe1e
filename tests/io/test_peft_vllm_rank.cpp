// vllm_lora_rank_note (io/peft_adapter.h) against vLLM's own rule, vllm/config/lora.py (vllm-project/vllm main):
// `MaxLoRARanks = Literal[1, 8, 16, 32, 64, 128, 256, 320, 512]` and `max_lora_rank: MaxLoRARanks = 16`. An adapter's
// rank must not exceed max_lora_rank; the flag takes only those values.
#include <gtest/gtest.h>

#include <string>

#include "io/peft_adapter.h"

namespace nvfp4lm::test {
namespace {

TEST(PeftVllmRank, NamesTheMaxLoraRankVllmNeeds) {
  for (const int rank : {1, 4, 8, 16}) EXPECT_EQ(vllm_lora_rank_note(rank), "") << rank;  // the default serves it
  const std::pair<int, int> needs[] = {{17, 32}, {32, 32}, {33, 64}, {200, 256}, {300, 320}, {321, 512}, {512, 512}};
  for (const auto& [rank, flag] : needs) {
    const std::string note = vllm_lora_rank_note(rank);
    EXPECT_NE(note.find("--max-lora-rank " + std::to_string(flag) + " "), std::string::npos) << rank << ": " << note;
  }
  const std::string too_big = vllm_lora_rank_note(1024);
  EXPECT_NE(too_big.find("cannot serve a rank-1024 adapter"), std::string::npos) << too_big;
  EXPECT_NE(too_big.find("--merge-lora"), std::string::npos) << too_big;
}

}  // namespace
}  // namespace nvfp4lm::test
