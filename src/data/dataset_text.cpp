// Plain-text datasets: the whole file as one document, or documents separated by blank lines (dataset.h).
// Line ends are normalised to "\n"; the document separator token is added at tokenization.
#include "data/dataset_records.h"

namespace nvfp4lm::data {

ParsedFile parse_text(std::string_view content, TextSplit split) {
  ParsedFile parsed;
  RawRecord document;
  document.kind = RecordKind::Text;
  if (split == TextSplit::WholeFile) {
    document.line = 1;
    document.text.reserve(content.size());
    for (size_t i = 0; i < content.size(); ++i) {
      if (content[i] == '\r' && i + 1 < content.size() && content[i + 1] == '\n') continue;
      document.text += content[i];
    }
    if (!content.empty()) parsed.records.push_back(std::move(document));
    return parsed;
  }
  for (const Line& line : split_lines(content)) {
    if (is_blank(line.text)) {
      if (document.line != 0) parsed.records.push_back(std::move(document));
      document = RawRecord{};
      document.kind = RecordKind::Text;
      continue;
    }
    if (document.line == 0) {
      document.line = line.number;
    } else {
      document.text += '\n';
    }
    document.text += line.text;
  }
  if (document.line != 0) parsed.records.push_back(std::move(document));
  return parsed;
}

}  // namespace nvfp4lm::data
