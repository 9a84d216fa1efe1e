// Fuzz target: a checkpoint's trainer_state.json (train/checkpoint.h) and what a resumed run or an export reads from
// it: the RNG states (rng_state_from_json), the run's settings (train_options_from_json, validate_train_options,
// resolve_resume_options), the data position (DataLoader::restore on a fixed three-sample loader, then two
// batches) and open_checkpoint_for_export. The input is the trainer_state.json text, written into a checkpoint
// directory step-3/ of the scratch directory. Properties: RNG states and settings that parse survive a round trip
// through their JSON form.
#include "data/data_loader.h"
#include "fuzz_util.h"
#include "train/checkpoint.h"
#include "train/export.h"
#include "train/train_options.h"

using namespace nvfp4lm;
using json = nlohmann::json;

namespace {

// The loader whose position tests/fuzz/make_corpus.py writes into the "resume" seed (its fingerprint is printed
// there); changing these samples or options only makes that seed stop at the fingerprint check.
DataLoader& fixed_loader() {
  static DataLoader loader(
      {Sample{{1, 2, 3, 4}, {0, 1, 1, 1}, 1}, Sample{{5, 6}, {0, 1}, 2}, Sample{{7, 8, 9}, {0, 0, 1}, 3}},
      DataLoaderOptions{.batch_size = 2, .seq_len = 8, .seed = 7, .pad_id = 0});
  return loader;
}

void check_rng(const json& value, const std::string& what) {
  fuzz::expect_error_only([&] {
    const Rng::State state = rng_state_from_json(value, what);
    FUZZ_CHECK(rng_state_from_json(rng_state_to_json(state), what) == state, "{}: RNG state changed", what);
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path dir = fuzz::fresh_scratch_dir("run/step-3");
  fuzz::write_scratch_file("run/step-3/trainer_state.json", fuzz::as_text(data, size));
  json state;
  if (!fuzz::expect_error_only([&] { state = read_trainer_state(dir); })) return 0;
  FUZZ_CHECK(state.is_object(), "read_trainer_state returned a {}", state.type_name());

  check_rng(state, "trainer_state.json");
  if (state.contains("rng") && state["rng"].is_object()) {
    for (const auto& [name, value] : state["rng"].items()) check_rng(value, name);
  }
  if (state.contains("config")) {
    const json& saved = state["config"];
    fuzz::expect_error_only([&] {
      const TrainOptions options = train_options_from_json(saved, "config");
      const json written = train_options_to_json(options);
      FUZZ_CHECK(train_options_to_json(train_options_from_json(written, "round trip")) == written,
                 "settings changed through their JSON form: {}", written.dump());
      validate_train_options(options);
    });
    fuzz::expect_error_only([&] {
      (void)resolve_resume_options(saved, TrainOptions{}, {"lr", "epochs", "output", "seed"}, "fuzz");
    });
  }
  if (state.contains("data_position")) {
    fuzz::expect_error_only([&] {
      DataLoader& loader = fixed_loader();
      loader.restore(state["data_position"]);
      for (int i = 0; i < 2; ++i) (void)loader.next_batch();
    });
  }
  fuzz::expect_error_only([&] { (void)open_checkpoint_for_export(dir); });
  return 0;
}
