// Byte-pair encoding of one pre-tokenized word (raw bytes) by merge rank, as HF tokenizers' BPE model
// does it (no dropout, no unk, no continuing-subword prefix): start from one symbol per byte, then
// repeatedly merge the adjacent pair with the lowest rank, the leftmost one among equal ranks, until no
// adjacent pair has a merge. Short words use a linear scan per merge; long words a heap over a linked
// list of symbols (O(n log n)), so a 1 MB "word" is still fast. Immutable after construction, so it is
// safe to use from many threads.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace nvfp4lm::tokenizer {

class BpeMerges {
 public:
  struct Merge {
    int32_t rank;    // position in the merges list: lower merges first
    int32_t result;  // id of the merged token
  };

  // `byte_tokens[b]` is the id of the single-byte token for byte b (all 256 must exist).
  BpeMerges(const std::vector<int32_t>& byte_tokens, size_t expected_merges);

  // Adds (or replaces, like HF's map building: the later entry wins) the merge left + right -> result.
  void add(int32_t left, int32_t right, int32_t rank, int32_t result);
  size_t size() const { return count_; }

  // Appends the ids of `word` (non-empty raw bytes) to `out`.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  // The two algorithms, exposed so tests can check that they agree.
  void encode_word_scan(std::string_view word, std::vector<int32_t>& out) const;
  void encode_word_heap(std::string_view word, std::vector<int32_t>& out) const;

  // Words up to this many bytes use the linear scan.
  static constexpr size_t kScanMaxBytes = 48;

 private:
  const Merge* find(int32_t left, int32_t right) const;

  struct Slot {
    uint64_t key;  // (left << 32) | right, or kEmpty
    Merge merge;
  };
  static constexpr uint64_t kEmpty = ~0ull;
  std::vector<Slot> slots_;  // open addressing, linear probing, power-of-two size
  uint64_t mask_ = 0;
  int shift_ = 0;
  size_t count_ = 0;
  int32_t byte_tokens_[256];
};

}  // namespace nvfp4lm::tokenizer
