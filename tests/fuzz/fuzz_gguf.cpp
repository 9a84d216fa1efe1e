// Fuzz target: a GGUF file (io/gguf_reader.h; `nvfp4lm info FILE.gguf`). The input is the whole file. Whatever
// open() accepts must describe only bytes inside the file: every tensor's data lies inside it, starts at a multiple
// of the alignment after the tensor table, and no two overlap. The first row of each tensor of a type nvfp4lm
// decodes is decoded (walking the mapping, so a range past the file's end faults here), and the info report is
// built and rendered, as `info` would.
#include <algorithm>
#include <vector>

#include "fuzz_util.h"
#include "io/gguf_info.h"
#include "io/gguf_quants.h"
#include "io/gguf_reader.h"

using namespace nvfp4lm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path path = fuzz::write_scratch_file("model.gguf", fuzz::as_text(data, size));
  fuzz::expect_error_only([&] {
    const GgufFile file = GgufFile::open(path);
    FUZZ_CHECK(file.file_bytes() == size, "file_bytes {} for an input of {} bytes", file.file_bytes(), size);
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    for (const GgufTensorInfo& tensor : file.tensors()) {
      FUZZ_CHECK(tensor.file_offset <= size && tensor.bytes <= size - tensor.file_offset,
                 "tensor {} [{}, +{}) lies outside the {}-byte file", tensor.name, tensor.file_offset, tensor.bytes,
                 size);
      FUZZ_CHECK(file.find_tensor(tensor.name) == &tensor, "find_tensor({}) does not return the tensor", tensor.name);
      ranges.emplace_back(tensor.file_offset, tensor.bytes);
      const std::optional<gguf::GgmlType> type = gguf::ggml_type_from_id(tensor.type_id);
      const int64_t row = tensor.shape[tensor.shape.rank() - 1];
      if (type && tensor.shape.numel() > 0 && row <= 4096) {
        std::vector<float> values(static_cast<size_t>(row));
        gguf::decode_row(*type, file.tensor_data(tensor), row, values.data());
      }
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i)
      FUZZ_CHECK(ranges[i - 1].first + ranges[i - 1].second <= ranges[i].first, "tensor data overlaps at byte {}",
                 ranges[i].first);
    for (const auto& [key, value] : file.metadata())
      FUZZ_CHECK(file.find(key) == &value && !value.describe().empty(), "metadata '{}' is not found again", key);
    const std::string text = gguf_info_text(gguf_info_json(file));
    FUZZ_CHECK(!text.empty(), "empty info text");
  });
  return 0;
}
