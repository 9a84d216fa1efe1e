// See kept_logits.h.
#include "tools/kept_logits.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <system_error>

#include "core/error.h"

namespace nvfp4lm {
namespace {

// Rows read back at a time from a spilled entry: a few MB with a large vocabulary.
constexpr int64_t kRowsPerRead = 16;

std::streamsize row_bytes(int64_t rows, int64_t vocab) {
  return static_cast<std::streamsize>(rows * vocab * static_cast<int64_t>(sizeof(float)));
}

}  // namespace

KeptLogits::KeptLogits(int64_t memory_bytes, std::function<std::filesystem::path()> scratch_dir)
    : memory_bytes_(memory_bytes), scratch_dir_(std::move(scratch_dir)) {}

KeptLogits::~KeptLogits() {
  for (const Entry& entry : entries_) {
    std::error_code ignored;
    if (!entry.file.empty()) std::filesystem::remove(entry.file, ignored);
  }
}

KeptLogits::KeptLogits(KeptLogits&&) noexcept = default;
KeptLogits& KeptLogits::operator=(KeptLogits&&) noexcept = default;

void KeptLogits::begin(int64_t rows, int64_t vocab) {
  Entry entry;
  entry.rows = rows;
  entry.vocab = vocab;
  const int64_t bytes = row_bytes(rows, vocab);
  if (held_bytes_ + bytes <= memory_bytes_) {
    held_bytes_ += bytes;
    entry.tensor = Tensor::empty({rows, vocab}, DType::F32);
  } else {
    entry.file = scratch_dir_() / fmt::format("logits-{}-{}.f32", static_cast<const void*>(this), entries_.size());
    std::ofstream create(entry.file, std::ios::binary | std::ios::trunc);
    NVFP4LM_CHECK(create.good(),
                  "parity: cannot create {} for the logits kept there (set --temp-dir to a writable "
                  "directory with room)",
                  entry.file.string());
  }
  entries_.push_back(std::move(entry));
}

void KeptLogits::append(int64_t row, const Tensor& block) {
  NVFP4LM_ASSERT(!entries_.empty(), "append before begin");
  Entry& entry = entries_.back();
  NVFP4LM_ASSERT(block.rank() == 2 && block.dtype() == DType::F32 && block.dim(1) == entry.vocab && row >= 0 &&
                     row + block.dim(0) <= entry.rows,
                 "kept logits: rows [{}, +{}) do not fit the entry", row, block.dim(0));
  const Tensor rows = block.to(Device::cpu()).contiguous();
  if (entry.file.empty()) {
    entry.tensor.narrow(0, row, rows.dim(0)).copy_from(rows);
    return;
  }
  std::fstream out(entry.file, std::ios::binary | std::ios::in | std::ios::out);
  out.seekp(row_bytes(row, entry.vocab));
  out.write(reinterpret_cast<const char*>(rows.data<float>()), row_bytes(rows.dim(0), entry.vocab));
  out.close();
  NVFP4LM_CHECK(!out.fail(),
                "parity: cannot write {} MB of logits to {} (is its disk full? point --temp-dir at one with room)",
                row_bytes(rows.dim(0), entry.vocab) >> 20, entry.file.string());
}

void KeptLogits::compare(size_t index, int64_t row, const Tensor& block, int64_t candidates,
                         LogitDiffAccumulator& diff) const {
  const Entry& entry = entries_.at(index);
  const Tensor mine = block.to(Device::cpu()).contiguous();
  NVFP4LM_ASSERT(mine.rank() == 2 && mine.dim(1) == entry.vocab && row >= 0 && row + mine.dim(0) <= entry.rows,
                 "compared logits of different shapes");
  const int64_t count = mine.dim(0), vocab = entry.vocab;
  if (entry.file.empty()) {
    for (int64_t i = 0; i < count; ++i)
      diff.add_row(mine.data<float>() + i * vocab, entry.tensor.data<float>() + (row + i) * vocab, vocab, candidates);
    return;
  }
  std::ifstream in(entry.file, std::ios::binary);
  in.seekg(row_bytes(row, vocab));
  std::vector<float> slice(static_cast<size_t>(std::min(kRowsPerRead, count) * vocab));
  for (int64_t at = 0; at < count; at += kRowsPerRead) {
    const int64_t n = std::min(kRowsPerRead, count - at);
    in.read(reinterpret_cast<char*>(slice.data()), row_bytes(n, vocab));
    NVFP4LM_CHECK(in.good(), "parity: cannot read the logits kept in {} back (was the file removed?)",
                  entry.file.string());
    for (int64_t i = 0; i < n; ++i)
      diff.add_row(mine.data<float>() + (at + i) * vocab, slice.data() + i * vocab, vocab, candidates);
  }
}

}  // namespace nvfp4lm
