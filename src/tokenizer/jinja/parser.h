// Template tokens -> syntax tree. Accepts the Jinja2 subset chat templates use (see template.h); any other
// statement, or a malformed one, is an nvfp4lm::Error naming the construct and its line.
#pragma once

#include <string_view>

#include "tokenizer/jinja/ast.h"

namespace nvfp4lm::jinja {

Body parse_template(std::string_view source);

}  // namespace nvfp4lm::jinja
