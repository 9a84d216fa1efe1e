// The Jinja interpreter's bounds (parser.cpp, template.cpp, methods.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace nvfp4lm::jinja {

// Bounds on what a template may ask for, so that a hostile or broken template (a model's tokenizer_config.json,
// --chat-template FILE) is an Error, never a crash, a hang or exhausted memory. Real chat templates stay far below
// them (a few nesting levels, expressions of tens of nodes, tens of steps per message).
inline constexpr size_t kMaxTemplateBytes = size_t{1} << 20;  // the template's text (published ones: < 20 KB)
inline constexpr int64_t kMaxTemplateNodes = 200'000;         // statements and expression parts of one template
inline constexpr int kMaxNesting = 64;                        // parentheses, statements in statements, macro calls
inline constexpr int kMaxExpressionNodes = 1024;              // nodes of one {{ }} or {% %} expression
inline constexpr int64_t kMaxSteps = 1'000'000;               // statements run and loop iterations, per render
inline constexpr size_t kMaxTextBytes = size_t{64} << 20;     // the output, and any string or list built on the way

}  // namespace nvfp4lm::jinja
