// Fuzz target: a checksums.json manifest (io/checksum.h: verify_checksum_manifest). The input is the manifest,
// written into a directory that also holds model.safetensors and optimizer.safetensors with fixed contents (the
// seed corpus lists them with their real sizes and digests, so fuzzing starts from manifests that verify). The
// function answers with a message ("" when everything verifies) and documents no exception: latest_checkpoint()
// relies on that to skip a damaged checkpoint, so here nothing may escape, not even an Error.
#include "fuzz_util.h"
#include "io/checksum.h"

using namespace nvfp4lm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fs::path dir = [] {
    const fs::path model = fuzz::write_scratch_file("checksums/model.safetensors", "model bytes\n");
    fuzz::write_scratch_file("checksums/optimizer.safetensors", std::string(100, 'o'));
    return model.parent_path();
  }();
  fuzz::write_scratch_file("checksums/checksums.json", fuzz::as_text(data, size));
  const std::vector<std::string> required = {"model.safetensors", "optimizer.safetensors"};
  for (VerifyLevel level : {VerifyLevel::Sizes, VerifyLevel::Checksums}) {
    (void)verify_checksum_manifest(dir, required, level);
  }
  return 0;
}
