// Reading a dataset file's text and splitting it into numbered lines (see dataset_records.h).
#include <algorithm>
#include <system_error>

#include "core/error.h"
#include "core/files.h"
#include "data/dataset_records.h"
#include "tokenizer/utf8.h"

namespace nvfp4lm::data {

std::string read_dataset_text(const std::filesystem::path& path) {
  std::error_code ec;
  NVFP4LM_CHECK(std::filesystem::exists(path, ec), "dataset {}: no such file", path.string());
  NVFP4LM_CHECK(!std::filesystem::is_directory(path, ec), "dataset {}: is a directory, expected a data file",
                path.string());
  // The whole file is held in memory with its tokens; 64 GiB is far past any fine-tuning set on one machine.
  constexpr uint64_t kMaxDatasetBytes = uint64_t{64} << 30;
  std::string text = read_text_file(path, kMaxDatasetBytes);  // a FIFO or /dev/zero is refused, not read forever
  const size_t bad = tokenizer::find_invalid_utf8(text);
  if (bad != text.size()) {
    const int64_t line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(bad), '\n');
    const size_t line_start = text.rfind('\n', bad == 0 ? 0 : bad - 1);
    const size_t column = (line_start == std::string::npos || bad == 0) ? bad : bad - line_start - 1;
    NVFP4LM_FAIL(
        "{}: invalid UTF-8 at byte offset {} of the file (byte {} of the line, value 0x{:02x}); datasets must be "
        "UTF-8 (convert with e.g. `iconv -f latin1 -t utf-8`)",
        where(path.string(), line), bad, column, static_cast<unsigned char>(text[bad]));
  }
  if (text.starts_with("\xEF\xBB\xBF")) text.erase(0, 3);
  return text;
}

std::string where(const std::string& file, int64_t line, bool entry) {
  return fmt::format("{} {} {}", file, entry ? "entry" : "line", line);
}

std::vector<Line> split_lines(std::string_view content) {
  std::vector<Line> lines;
  size_t begin = 0;
  int64_t number = 1;
  while (begin < content.size()) {
    size_t end = content.find('\n', begin);
    if (end == std::string_view::npos) end = content.size();
    std::string_view text = content.substr(begin, end - begin);
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    lines.push_back({text, number++});
    begin = end + 1;
  }
  return lines;
}

bool is_blank(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

}  // namespace nvfp4lm::data
