// Fuzz target: config.json and generation_config.json (io/hf_config.h). The input is the file; it is read both as a
// model config and as a generation config. A config that parses must validate, count its parameters without
// overflow (UBSan), and survive the round trip through qwen3_config_to_json unchanged.
#include "fuzz_util.h"
#include "io/hf_config.h"

using namespace nvfp4lm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path path = fuzz::write_scratch_file("config.json", fuzz::as_text(data, size));
  fuzz::expect_error_only([&] {
    const Qwen3Config config = load_qwen3_config(path);
    config.validate("fuzz");
    (void)config.total_parameters();
    const nlohmann::json written = qwen3_config_to_json(config);
    const Qwen3Config again = parse_qwen3_config(written, "round trip");
    FUZZ_CHECK(again == config, "config changed through qwen3_config_to_json: {}", written.dump());
    (void)generation_config_to_json(config);
  });
  // Token ids of a generation config are not range-checked here: end_of_sequence_ids() drops those outside the
  // model's vocabulary.
  fuzz::expect_error_only([&] { (void)load_generation_config(path); });
  return 0;
}
