// TokenTrie: a vocabulary's tokens as a prefix tree of their bytes, flattened in depth-first order, so that the
// allowed-token mask (grammar_constraint.h) is one forward pass over an array: node i's subtree is [i, subtree_end),
// and a subtree the grammar rejects at its root is skipped whole (the idea of llama.cpp's and xgrammar's token
// tries; the walk, with one memoized matcher state per depth, is ours).
//
// Only tokens that can appear in generated text are in it: special tokens (<|im_end|>, <|endoftext|>, ...) are not —
// end-of-sequence tokens are handled apart — and neither are ids the vocabulary leaves unused. Non-special added
// tokens (<tool_call>, <think>) are, by their text.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace nvfp4lm::constrain {

class TokenTrie {
 public:
  struct Node {
    uint8_t byte = 0;
    int32_t depth = 0;  // bytes from the root, 1 for the first byte
    int32_t subtree_end = 0;
    int32_t tokens_begin = 0, tokens_end = 0;  // into token_ids(): the tokens whose bytes end here
  };

  // token_bytes[id]: the bytes of token id; empty for an id that may not be generated.
  explicit TokenTrie(const std::vector<std::string>& token_bytes);
  static std::shared_ptr<const TokenTrie> from_tokenizer(const Tokenizer& tokenizer);

  size_t vocab_size() const { return vocab_size_; }
  std::span<const Node> nodes() const { return nodes_; }
  std::span<const int32_t> tokens_at(const Node& node) const {
    return std::span<const int32_t>(token_ids_)
        .subspan(static_cast<size_t>(node.tokens_begin), static_cast<size_t>(node.tokens_end - node.tokens_begin));
  }
  int32_t max_depth() const { return max_depth_; }
  const std::string& token_bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }

 private:
  size_t vocab_size_ = 0;
  std::vector<Node> nodes_;
  std::vector<int32_t> token_ids_;
  std::vector<std::string> bytes_;
  int32_t max_depth_ = 0;
};

}  // namespace nvfp4lm::constrain
