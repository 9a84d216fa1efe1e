// vllm_lora_rank_note (io/peft_adapter.h) against vLLM's own rule, vllm/config/lora.py (vllm-project/vllm main):
// `MaxLoRARanks = Literal[1, 8, 16, 32, 64, 128, 256, 320, 512]` and `max_lora_rank: MaxLoRARanks = 16`. An adapter's
// rank must not exceed max_lora_rank; the flag takes only those values.
#include <gtest/gtest.h>

#include <string>

#include "io/peft_adapter.h"

namespace nvfp4lm::test::test_peft_vllm_rank {
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

// The adapter's README.md: PEFT's front matter keys, the base note when there is one, vLLM's flag when the rank needs
// it.
TEST(PeftVllmRank, ModelCardNamesTheBaseAndWhatServingNeeds) {
  PeftLoraConfig config;
  config.base_model = "Qwen/Qwen3-4B-Instruct-2507";
  config.rank = 32;
  config.alpha = 64;
  config.target_modules = {"q_proj", "v_proj"};
  const std::string plain = peft_adapter_model_card(config, "");
  EXPECT_EQ(plain.rfind("---\nbase_model: \"Qwen/Qwen3-4B-Instruct-2507\"\nlibrary_name: peft\n", 0), 0u) << plain;
  EXPECT_NE(plain.find("rank 32, alpha 64, over q_proj, v_proj."), std::string::npos) << plain;
  EXPECT_NE(plain.find("applies to `Qwen/Qwen3-4B-Instruct-2507` as it is"), std::string::npos) << plain;
  EXPECT_NE(plain.find(vllm_lora_rank_note(32)), std::string::npos) << plain;
  config.rank = 8;
  config.layers_to_transform = std::vector<int>{2, 3};
  const std::string noted = peft_adapter_model_card(config, "needs the NVFP4 base");
  EXPECT_NE(noted.find("over q_proj, v_proj of layers 2, 3."), std::string::npos) << noted;
  EXPECT_NE(noted.find("needs the NVFP4 base"), std::string::npos) << noted;
  EXPECT_EQ(noted.find("as it is"), std::string::npos) << noted;
  EXPECT_EQ(noted.find("max-lora-rank"), std::string::npos) << noted;
}

}  // namespace
}  // namespace nvfp4lm::test::test_peft_vllm_rank
