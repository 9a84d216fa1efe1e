// See lexer.h. Text is scanned up to the next "{{", "{%" or "{#"; each tag's inside is scanned by
// lex_tag_body until its closing delimiter, outside any open brackets (so "{{ {'a': {}} }}" works).
#include "tokenizer/jinja/lexer.h"

#include <cctype>

#include "core/error.h"

namespace nvfp4lm::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

class Lexer {
 public:
  explicit Lexer(std::string_view source) : source_(source) {}

  std::vector<Token> run() {
    bool line_starting = true;  // the next text starts a line (Jinja2's lstrip_blocks condition)
    while (pos_ < source_.size()) {
      const size_t open = find_tag_open(pos_);
      std::string text(source_.substr(pos_, open - pos_));
      const int text_line = line_;
      advance_to(open);
      if (open == source_.size()) {
        push_text(std::move(text), text_line);
        break;
      }
      const char kind = source_[open + 1];  // '{', '%' or '#'
      const char modifier = open + 2 < source_.size() ? source_[open + 2] : '\0';
      if (modifier == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (kind != '{' && modifier != '+') {
        strip_line_indent(text, line_starting);
      }
      push_text(std::move(text), text_line);
      advance_to(open + 2 + (modifier == '-' || modifier == '+' ? 1 : 0));
      if (kind == '#') {
        line_starting = skip_comment();
      } else {
        line_starting = lex_tag_body(kind == '{');
        if (opens_raw_block()) line_starting = lex_raw_block();
      }
    }
    tokens_.push_back({TokenKind::End, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t find_tag_open(size_t from) const {
    for (size_t i = from; i + 1 < source_.size(); ++i) {
      if (source_[i] == '{' && (source_[i + 1] == '{' || source_[i + 1] == '%' || source_[i + 1] == '#')) return i;
    }
    return source_.size();
  }

  void advance_to(size_t target) {
    for (; pos_ < target; ++pos_) {
      if (source_[pos_] == '\n') ++line_;
    }
  }

  void push_text(std::string text, int line) {
    if (!text.empty()) tokens_.push_back({TokenKind::Text, std::move(text), line});
  }

  // lstrip_blocks: drop the spaces and tabs between the line start and the tag.
  static void strip_line_indent(std::string& text, bool line_starting) {
    const size_t newline = text.rfind('\n');
    const size_t line_start = newline == std::string::npos ? 0 : newline + 1;
    if (newline == std::string::npos && !line_starting) return;
    for (size_t i = line_start; i < text.size(); ++i) {
      if (text[i] != ' ' && text[i] != '\t') return;
    }
    text.resize(line_start);
  }

  // After a closing delimiter: "-" strips the following whitespace; trim_blocks removes one newline after
  // %} and #}. Returns whether what was consumed ends a line.
  bool after_close(bool strip, bool trim_newline) {
    bool ended_line = false;
    if (strip) {
      while (pos_ < source_.size() && is_space(source_[pos_])) {
        ended_line = source_[pos_] == '\n';
        advance_to(pos_ + 1);
      }
    } else if (trim_newline && pos_ < source_.size() && source_[pos_] == '\n') {
      advance_to(pos_ + 1);
      ended_line = true;
    }
    return ended_line;
  }

  // The tokens just lexed are {% raw %}.
  bool opens_raw_block() const {
    const size_t n = tokens_.size();
    return n >= 3 && tokens_[n - 3].kind == TokenKind::StmtBegin && tokens_[n - 2].kind == TokenKind::Name &&
           tokens_[n - 2].text == "raw" && tokens_[n - 1].kind == TokenKind::StmtEnd;
  }

  // The text up to {% endraw %}, verbatim (whitespace control applies at its two ends as for any tag).
  bool lex_raw_block() {
    const int start_line = tokens_.back().line;
    tokens_.resize(tokens_.size() - 3);
    for (size_t at = pos_;; ++at) {
      at = source_.find("{%", at);
      NVFP4LM_CHECK(at != std::string_view::npos,
                    "chat template line {}: {{% raw %}} is never closed; add {{% endraw %}}", start_line);
      size_t cursor = at + 2;
      const char modifier = cursor < source_.size() ? source_[cursor] : '\0';
      if (modifier == '-' || modifier == '+') ++cursor;
      while (cursor < source_.size() && is_space(source_[cursor])) ++cursor;
      if (source_.substr(cursor, 6) != "endraw") continue;
      cursor += 6;
      while (cursor < source_.size() && is_space(source_[cursor])) ++cursor;
      const bool strip_after = cursor < source_.size() && source_[cursor] == '-';
      if (strip_after) ++cursor;
      if (source_.substr(cursor, 2) != "%}") continue;
      std::string text(source_.substr(pos_, at - pos_));
      if (modifier == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (modifier != '+') {
        strip_line_indent(text, false);
      }
      push_text(std::move(text), line_);
      advance_to(cursor + 2);
      return after_close(strip_after, true);
    }
  }

  bool skip_comment() {
    const int start_line = line_;
    const size_t close = source_.find("#}", pos_);
    NVFP4LM_CHECK(close != std::string_view::npos, "chat template line {}: comment {{# is never closed; add #}}",
                  start_line);
    const bool strip = close > pos_ && source_[close - 1] == '-';
    advance_to(close + 2);
    return after_close(strip, true);
  }

  bool lex_tag_body(bool expression) {
    const int start_line = line_;
    tokens_.push_back({expression ? TokenKind::ExprBegin : TokenKind::StmtBegin, "", line_});
    int depth = 0;  // open ( [ {
    while (true) {
      while (pos_ < source_.size() && is_space(source_[pos_])) advance_to(pos_ + 1);
      NVFP4LM_CHECK(pos_ < source_.size(), "chat template line {}: {} is never closed; add {}", start_line,
                    expression ? "{{" : "{%", expression ? "}}" : "%}");
      const std::string_view rest = source_.substr(pos_);
      const std::string_view close = expression ? "}}" : "%}";
      if (depth == 0 && (rest.starts_with(close) || (rest[0] == '-' && rest.substr(1).starts_with(close)))) {
        const bool strip = rest[0] == '-';
        // Jinja2 applies trim_blocks to every %} except the one of {% raw %}.
        const size_t n = tokens_.size();
        const bool opens_raw = !expression && tokens_[n - 2].kind == TokenKind::StmtBegin &&
                               tokens_[n - 1].kind == TokenKind::Name && tokens_[n - 1].text == "raw";
        advance_to(pos_ + close.size() + (strip ? 1 : 0));
        tokens_.push_back({expression ? TokenKind::ExprEnd : TokenKind::StmtEnd, "", line_});
        return after_close(strip, !expression && !opens_raw);
      }
      lex_one(depth);
    }
  }

  void lex_one(int& depth) {
    const char c = source_[pos_];
    const int line = line_;
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t end = pos_;
      while (end < source_.size() && (std::isalnum(static_cast<unsigned char>(source_[end])) || source_[end] == '_')) {
        ++end;
      }
      tokens_.push_back({TokenKind::Name, std::string(source_.substr(pos_, end - pos_)), line});
      advance_to(end);
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      lex_number();
    } else if (c == '\'' || c == '"') {
      lex_string(c);
    } else {
      static constexpr std::string_view two_char[] = {"//", "**", "==", "!=", "<=", ">="};
      std::string op(1, c);
      for (const std::string_view candidate : two_char) {
        if (source_.substr(pos_, 2) == candidate) op = candidate;
      }
      NVFP4LM_CHECK(op.size() == 2 || std::string_view("+-*/%~<>=()[]{},.:|").find(c) != std::string_view::npos,
                    "chat template line {}: unexpected character '{}' inside a tag", line, c);
      if (c == '(' || c == '[' || c == '{') ++depth;
      if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
      tokens_.push_back({TokenKind::Operator, op, line});
      advance_to(pos_ + op.size());
    }
  }

  void lex_number() {
    size_t end = pos_;
    const auto digits = [&] {
      while (end < source_.size() && (std::isdigit(static_cast<unsigned char>(source_[end])) || source_[end] == '_')) {
        ++end;
      }
    };
    digits();
    bool is_float = false;
    if (end + 1 < source_.size() && source_[end] == '.' && std::isdigit(static_cast<unsigned char>(source_[end + 1]))) {
      is_float = true;
      ++end;
      digits();
    }
    if (end < source_.size() && (source_[end] == 'e' || source_[end] == 'E')) {
      size_t exp = end + 1;
      if (exp < source_.size() && (source_[exp] == '+' || source_[exp] == '-')) ++exp;
      if (exp < source_.size() && std::isdigit(static_cast<unsigned char>(source_[exp]))) {
        is_float = true;
        end = exp;
        digits();
      }
    }
    std::string text;
    for (size_t i = pos_; i < end; ++i) {
      if (source_[i] != '_') text += source_[i];
    }
    tokens_.push_back({is_float ? TokenKind::Float : TokenKind::Integer, text, line_});
    advance_to(end);
  }

  // Python string literal escapes: \n \t \r \\ \' \" \0 \xNN \uNNNN; any other backslash is kept.
  void lex_string(char quote) {
    const int line = line_;
    std::string value;
    size_t i = pos_ + 1;
    while (true) {
      NVFP4LM_CHECK(i < source_.size(), "chat template line {}: string literal is never closed; add {}", line, quote);
      const char c = source_[i];
      if (c == quote) break;
      if (c != '\\' || i + 1 >= source_.size()) {
        value += c;
        ++i;
        continue;
      }
      const char e = source_[i + 1];
      i += 2;
      switch (e) {
        case 'n':
          value += '\n';
          break;
        case 't':
          value += '\t';
          break;
        case 'r':
          value += '\r';
          break;
        case '0':
          value += '\0';
          break;
        case '\\':
          value += '\\';
          break;
        case '\'':
          value += '\'';
          break;
        case '"':
          value += '"';
          break;
        case '\n':
          break;  // line continuation
        case 'x':
        case 'u': {
          const size_t width = e == 'x' ? 2 : 4;
          NVFP4LM_CHECK(i + width <= source_.size(), "chat template line {}: truncated \\{} escape", line, e);
          append_utf8(static_cast<uint32_t>(std::stoul(std::string(source_.substr(i, width)), nullptr, 16)), value);
          i += width;
          break;
        }
        default:
          value += '\\';
          value += e;
      }
    }
    tokens_.push_back({TokenKind::String, std::move(value), line});
    advance_to(i + 1);
  }

  static void append_utf8(uint32_t cp, std::string& out) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string_view source_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex_template(std::string_view source) { return Lexer(source).run(); }

}  // namespace nvfp4lm::jinja
