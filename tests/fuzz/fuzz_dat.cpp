// Fuzz target: a `.dat` weight file (io/dat_format.h), then the same file as a model (io/model_files.h: open_model
// with tests/fuzz/dat_model_config.json beside it, the shape the seed corpus was written for). The input is the
// whole file. Whatever DatFile::open accepts must describe only bytes inside the file; every weight open_model
// lists must load with its listed shape, and NVFP4 weights must dequantize.
#include "fuzz_util.h"
#include "io/dat_format.h"
#include "io/model_files.h"
#include "quant/nvfp4.h"

using namespace nvfp4lm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  [[maybe_unused]] static const fs::path config_path =
      fuzz::write_scratch_file("dat/config.json", fuzz::read_source_file("tests/fuzz/dat_model_config.json"));
  const fs::path path = fuzz::write_scratch_file("dat/model.dat", fuzz::as_text(data, size));
  fuzz::expect_error_only([&] {
    const std::shared_ptr<DatFile> file = DatFile::open(path);
    for (const DatEntry& entry : file->entries()) {
      FUZZ_CHECK(entry.offset <= size && entry.bytes <= size - entry.offset,
                 "entry {} [{}, +{}) lies outside the {}-byte file", entry.key, entry.offset, entry.bytes, size);
      FUZZ_CHECK(file->find(entry.key) == &entry, "find({}) does not return the entry", entry.key);
      const Tensor tensor = file->tensor(entry);
      FUZZ_CHECK(tensor.numel() == entry.shape().numel(), "entry {}: tensor {} for dims of {} elements", entry.key,
                 tensor.str(), entry.shape().numel());
    }
  });
  fuzz::expect_error_only([&] {
    const std::unique_ptr<ModelFiles> model = open_model(path);
    for (const WeightInfo& info : model->weights()) {
      const ModelWeight weight = model->load(info.name);
      if (weight.is_nvfp4()) {
        FUZZ_CHECK(info.nvfp4 && weight.nvfp4.rows == info.shape[0] && weight.nvfp4.cols == info.shape[1],
                   "{}: NVFP4 {}x{} listed as {}", info.name, weight.nvfp4.rows, weight.nvfp4.cols, info.shape.str());
        const Tensor dense = dequantize_nvfp4(weight.nvfp4, DType::F32);
        FUZZ_CHECK(dense.shape() == info.shape, "{}: dequantized to {}", info.name, dense.str());
      } else {
        FUZZ_CHECK(!info.nvfp4 && weight.dense.shape() == info.shape && weight.dense.dtype() == info.dtype,
                   "{}: loaded {} listed as {}", info.name, weight.dense.str(), info.shape.str());
      }
      model->release(info.name);
    }
  });
  return 0;
}
