// Fuzz target: a safetensors file (io/safetensors_reader.h). The input is the whole file. Whatever open() accepts
// must describe only bytes inside the file, its entries (in data order) must tile the data area exactly, from the end
// of the header to the end of the file, and the zero-copy view and the pread copy of every entry must hold the same
// bytes (reading a view walks the mapping, so a range past the file's end faults here, not in a user's run).
#include <cstring>

#include "fuzz_util.h"
#include "io/safetensors_reader.h"

using namespace nvfp4lm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path path = fuzz::write_scratch_file("model.safetensors", fuzz::as_text(data, size));
  fuzz::expect_error_only([&] {
    const std::shared_ptr<SafetensorsFile> file = SafetensorsFile::open(path);
    FUZZ_CHECK(file->file_bytes() == size && size >= 8, "file_bytes {} for an input of {} bytes", file->file_bytes(),
               size);
    uint64_t header_bytes;
    std::memcpy(&header_bytes, data, 8);  // little-endian hosts only, like the reader
    uint64_t tiled = 8 + header_bytes;    // the data area starts after the header
    for (const SafetensorsEntry& entry : file->entries()) {
      FUZZ_CHECK(entry.offset <= size && entry.bytes <= size - entry.offset,
                 "entry {} [{}, +{}) lies outside the {}-byte file", entry.name, entry.offset, entry.bytes, size);
      FUZZ_CHECK(entry.offset == tiled, "entry {} starts at byte {}, the previous one ends at {}", entry.name,
                 entry.offset, tiled);
      tiled += entry.bytes;
      FUZZ_CHECK(file->find(entry.name) == &entry, "find({}) does not return the entry", entry.name);
      const Tensor view = file->tensor(entry);
      const Tensor copy = file->read(entry);
      FUZZ_CHECK(view.nbytes() == entry.bytes && copy.nbytes() == entry.bytes,
                 "entry {}: {} bytes, view {} and copy {}", entry.name, entry.bytes, view.nbytes(), copy.nbytes());
      FUZZ_CHECK(entry.bytes == 0 || std::memcmp(view.raw(), copy.raw(), entry.bytes) == 0,
                 "entry {}: the mapped view and the pread copy differ", entry.name);
      file->drop_pages(entry);
    }
    FUZZ_CHECK(tiled == size, "the entries end at byte {} of a {}-byte file", tiled, size);
  });
  return 0;
}
