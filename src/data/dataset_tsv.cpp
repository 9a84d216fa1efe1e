// TSV datasets: prompt<TAB>target, one pair a line; '#' comment lines and blank lines skipped (dataset.h).
#include <algorithm>

#include "core/error.h"
#include "data/dataset_records.h"

namespace nvfp4lm::data {

std::string unescape_tsv_field(std::string_view field) {
  std::string out;
  out.reserve(field.size());
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] != '\\' || i + 1 == field.size()) {
      out += field[i];
      continue;
    }
    switch (field[i + 1]) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case '\\':
        out += '\\';
        break;
      case '#':
        out += '#';
        break;
      default:
        out += '\\';
        continue;  // not an escape: keep the backslash, read the next byte normally
    }
    ++i;
  }
  return out;
}

ParsedFile parse_tsv(std::string_view content, const std::string& file) {
  ParsedFile parsed;
  for (const Line& line : split_lines(content)) {
    if (is_blank(line.text) || line.text.front() == '#') continue;
    const std::string place = where(file, line.number);
    const auto tabs = std::count(line.text.begin(), line.text.end(), '\t');
    NVFP4LM_CHECK(tabs > 0, "{}: no tab; each line must be prompt<TAB>target (comment lines start with '#')", place);
    NVFP4LM_CHECK(tabs == 1,
                  "{}: {} tabs, expected exactly one between prompt and target (write a tab inside a "
                  "field as \\t)",
                  place, tabs);
    const size_t tab = line.text.find('\t');
    RawRecord record;
    record.kind = RecordKind::Pair;
    record.line = line.number;
    record.prompt = unescape_tsv_field(line.text.substr(0, tab));
    record.target = unescape_tsv_field(line.text.substr(tab + 1));
    NVFP4LM_CHECK(!is_blank(record.target), "{}: empty target after the tab; every pair needs a target to train on",
                  place);
    parsed.records.push_back(std::move(record));
  }
  return parsed;
}

}  // namespace nvfp4lm::data
