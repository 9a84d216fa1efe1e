// BPE merge algorithms against a direct reference (repeatedly merge the leftmost lowest-rank pair) on a
// random merge table; the linear-scan and heap variants must agree on every word length.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "tokenizer/bpe.h"

namespace nvfp4lm::tokenizer::test_bpe {
namespace {

struct Table {
  std::vector<int32_t> byte_tokens;
  std::map<std::pair<int32_t, int32_t>, BpeMerges::Merge> merges;
};

// Tokens 0..255 are bytes; merge k creates token 1000+k from two existing tokens, favouring the letters
// 'a'..'e' and recent tokens so that long words get deep merge chains.
Table random_table(uint32_t seed, int count) {
  std::mt19937 rng(seed);
  Table table;
  for (int b = 0; b < 256; ++b) table.byte_tokens.push_back(b);
  std::vector<int32_t> pool = {'a', 'b', 'c', 'd', 'e'};
  for (int k = 0; k < count; ++k) {
    int32_t left = pool[rng() % pool.size()], right = pool[rng() % pool.size()];
    if (table.merges.count({left, right})) continue;
    int32_t result = 1000 + k;
    table.merges[{left, right}] = {k, result};
    pool.push_back(result);
  }
  return table;
}

std::vector<int32_t> reference_bpe(const Table& table, const std::string& word) {
  std::vector<int32_t> ids;
  for (unsigned char c : word) ids.push_back(table.byte_tokens[c]);
  while (true) {
    size_t best = SIZE_MAX;
    int32_t best_rank = INT32_MAX;
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
      auto it = table.merges.find({ids[i], ids[i + 1]});
      if (it != table.merges.end() && it->second.rank < best_rank) {
        best = i;
        best_rank = it->second.rank;
      }
    }
    if (best == SIZE_MAX) return ids;
    ids[best] = table.merges.at({ids[best], ids[best + 1]}).result;
    ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
}

BpeMerges build(const Table& table) {
  BpeMerges merges(table.byte_tokens, 16);  // small on purpose: exercises growth
  for (const auto& [pair, merge] : table.merges) merges.add(pair.first, pair.second, merge.rank, merge.result);
  return merges;
}

TEST(Bpe, ScanAndHeapMatchTheReference) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    Table table = random_table(seed, 400);
    BpeMerges merges = build(table);
    EXPECT_EQ(merges.size(), table.merges.size());
    std::mt19937 rng(seed * 7);
    for (int trial = 0; trial < 300; ++trial) {
      size_t length = 1 + rng() % (trial < 250 ? 80 : 600);
      std::string word;
      for (size_t i = 0; i < length; ++i) word.push_back(static_cast<char>(rng() % 8 == 0 ? 'x' : 'a' + rng() % 5));
      std::vector<int32_t> want = reference_bpe(table, word), scan, heap, dispatch;
      merges.encode_word_scan(word, scan);
      merges.encode_word_heap(word, heap);
      merges.encode_word(word, dispatch);
      ASSERT_EQ(scan, want) << "seed " << seed << " word " << word;
      ASSERT_EQ(heap, want) << "seed " << seed << " word " << word;
      ASSERT_EQ(dispatch, want);
    }
  }
}

TEST(Bpe, EqualRanksMergeLeftmostFirst) {
  Table table;
  for (int b = 0; b < 256; ++b) table.byte_tokens.push_back(b);
  table.merges[{'a', 'a'}] = {0, 500};
  BpeMerges merges = build(table);
  std::vector<int32_t> scan, heap;
  merges.encode_word_scan("aaa", scan);
  merges.encode_word_heap("aaa", heap);
  EXPECT_EQ(scan, (std::vector<int32_t>{500, 'a'}));
  EXPECT_EQ(heap, scan);
}

TEST(Bpe, VeryLongWordUsesTheHeapPath) {
  // 200k bytes in one word: O(n^2) would take minutes; the heap finishes in milliseconds.
  Table table = random_table(5, 300);
  BpeMerges merges = build(table);
  std::string word(200000, 'a');
  for (size_t i = 0; i < word.size(); i += 7) word[i] = 'b';
  std::vector<int32_t> ids;
  merges.encode_word(word, ids);
  // The tokens must spell the word: sum their byte lengths (merges in rank order build the lengths).
  std::map<int32_t, size_t> lengths;
  for (int b = 0; b < 256; ++b) lengths[b] = 1;
  std::vector<std::pair<int32_t, std::pair<int32_t, int32_t>>> by_rank;
  for (const auto& [pair, merge] : table.merges) by_rank.push_back({merge.rank, pair});
  std::sort(by_rank.begin(), by_rank.end());
  for (const auto& [rank, pair] : by_rank) {
    lengths[table.merges.at(pair).result] = lengths.at(pair.first) + lengths.at(pair.second);
  }
  size_t total = 0;
  for (int32_t id : ids) total += lengths.at(id);
  EXPECT_EQ(total, word.size());
  EXPECT_LT(ids.size(), word.size());
}

}  // namespace
}  // namespace nvfp4lm::tokenizer::test_bpe
