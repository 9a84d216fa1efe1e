// See token_trie.h.
#include "infer/constrain/token_trie.h"

#include <algorithm>
#include <numeric>

namespace nvfp4lm::constrain {

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes)
    : vocab_size_(token_bytes.size()), bytes_(token_bytes) {
  std::vector<int32_t> order;
  for (size_t id = 0; id < token_bytes.size(); ++id)
    if (!token_bytes[id].empty()) order.push_back(static_cast<int32_t>(id));
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)] ||
           (bytes_[static_cast<size_t>(a)] == bytes_[static_cast<size_t>(b)] && a < b);
  });
  // In sorted order each token shares a prefix with the one before: the path stays open up to that prefix and new
  // nodes follow. `path[d]` is the node at depth d + 1 on the current path.
  std::vector<int32_t> path;
  std::string previous;
  auto close_to = [&](size_t depth) {
    while (path.size() > depth) {
      nodes_[static_cast<size_t>(path.back())].subtree_end = static_cast<int32_t>(nodes_.size());
      path.pop_back();
    }
  };
  for (int32_t id : order) {
    const std::string& bytes = bytes_[static_cast<size_t>(id)];
    size_t common = 0;
    while (common < bytes.size() && common < previous.size() && bytes[common] == previous[common]) ++common;
    close_to(common);
    for (size_t depth = common; depth < bytes.size(); ++depth) {
      path.push_back(static_cast<int32_t>(nodes_.size()));
      Node node;
      node.byte = static_cast<uint8_t>(bytes[depth]);
      node.depth = static_cast<int32_t>(depth + 1);
      node.tokens_begin = node.tokens_end = static_cast<int32_t>(token_ids_.size());
      nodes_.push_back(node);
    }
    // A prefix sorts before its extensions, so the tokens ending at a node come right after the node is made (equal
    // byte strings one after another): they are contiguous in token_ids_.
    Node& end = nodes_[static_cast<size_t>(path.back())];
    token_ids_.push_back(id);
    end.tokens_end = static_cast<int32_t>(token_ids_.size());
    max_depth_ = std::max(max_depth_, static_cast<int32_t>(bytes.size()));
    previous = bytes;
  }
  close_to(0);
}

std::shared_ptr<const TokenTrie> TokenTrie::from_tokenizer(const Tokenizer& tokenizer) {
  std::vector<std::string> bytes(tokenizer.vocab_size());
  for (size_t id = 0; id < bytes.size(); ++id) {
    const auto token = static_cast<int32_t>(id);
    if (tokenizer.is_used(token) && !tokenizer.is_special(token)) bytes[id] = std::string(tokenizer.token_bytes(token));
  }
  return std::make_shared<const TokenTrie>(bytes);
}

}  // namespace nvfp4lm::constrain
