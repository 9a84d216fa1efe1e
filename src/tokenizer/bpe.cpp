// See bpe.h. The heap variant mirrors HF's Word::merge_all: a min-heap of (rank, position) candidates;
// a popped candidate is stale (skipped) when its pair no longer has the queued rank.
// Positions are indices of the original byte symbols, so "leftmost" is well defined.
#include "tokenizer/bpe.h"

#include <algorithm>
#include <bit>
#include <functional>

#include "core/error.h"

namespace nvfp4lm::tokenizer {

BpeMerges::BpeMerges(const std::vector<int32_t>& byte_tokens, size_t expected_merges) {
  NVFP4LM_ASSERT(byte_tokens.size() == 256);
  std::copy(byte_tokens.begin(), byte_tokens.end(), byte_tokens_);
  // Load factor <= 2/3 with linear probing; a power of two so the hash is a multiply and a shift.
  size_t capacity = std::bit_ceil(std::max<size_t>(16, expected_merges + expected_merges / 2));
  slots_.assign(capacity, Slot{kEmpty, {0, 0}});
  mask_ = capacity - 1;
  shift_ = 64 - std::countr_zero(capacity);
}

void BpeMerges::add(int32_t left, int32_t right, int32_t rank, int32_t result) {
  if (count_ * 3 >= slots_.size() * 2) {  // grow (only when expected_merges was too small)
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.size() * 2, Slot{kEmpty, {0, 0}});
    mask_ = slots_.size() - 1;
    shift_ = 64 - std::countr_zero(slots_.size());
    count_ = 0;
    for (const Slot& s : old) {
      if (s.key != kEmpty)
        add(static_cast<int32_t>(s.key >> 32), static_cast<int32_t>(s.key & 0xFFFFFFFF), s.merge.rank, s.merge.result);
    }
  }
  uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  uint64_t i = (key * 0x9E3779B97F4A7C15ull) >> shift_;
  while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
  if (slots_[i].key == kEmpty) ++count_;
  slots_[i] = Slot{key, {rank, result}};
}

const BpeMerges::Merge* BpeMerges::find(int32_t left, int32_t right) const {
  uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  uint64_t i = (key * 0x9E3779B97F4A7C15ull) >> shift_;
  while (true) {
    const Slot& slot = slots_[i];
    if (slot.key == key) return &slot.merge;
    if (slot.key == kEmpty) return nullptr;
    i = (i + 1) & mask_;
  }
}

void BpeMerges::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() <= kScanMaxBytes) {
    encode_word_scan(word, out);
  } else {
    encode_word_heap(word, out);
  }
}

void BpeMerges::encode_word_scan(std::string_view word, std::vector<int32_t>& out) const {
  constexpr int32_t kNoMerge = INT32_MAX;
  const size_t n = word.size();
  if (n == 1) {
    out.push_back(byte_tokens_[static_cast<unsigned char>(word[0])]);
    return;
  }
  // ids[i] is symbol i; ranks[i]/results[i] describe the pair (i, i+1).
  int32_t stack_buffer[3 * kScanMaxBytes];
  std::vector<int32_t> heap_buffer(n > kScanMaxBytes ? 3 * n : 0);
  int32_t* ids = n > kScanMaxBytes ? heap_buffer.data() : stack_buffer;
  int32_t* ranks = ids + n;
  int32_t* results = ranks + n;
  size_t count = n;
  for (size_t i = 0; i < n; ++i) ids[i] = byte_tokens_[static_cast<unsigned char>(word[i])];
  auto score = [&](size_t i) {
    const Merge* m = find(ids[i], ids[i + 1]);
    ranks[i] = m ? m->rank : kNoMerge;
    results[i] = m ? m->result : -1;
  };
  for (size_t i = 0; i + 1 < count; ++i) score(i);
  while (count > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < count; ++i) {
      if (ranks[i] < ranks[best]) best = i;  // strict: the leftmost lowest rank wins
    }
    if (ranks[best] == kNoMerge) break;
    ids[best] = results[best];
    // Remove symbol best+1 and pair (best+1, best+2) -> shift both arrays left by one.
    std::copy(ids + best + 2, ids + count, ids + best + 1);
    std::copy(ranks + best + 1, ranks + count - 1, ranks + best);
    std::copy(results + best + 1, results + count - 1, results + best);
    --count;
    if (best > 0) score(best - 1);
    if (best + 1 < count) score(best);
  }
  out.insert(out.end(), ids, ids + count);
}

void BpeMerges::encode_word_heap(std::string_view word, std::vector<int32_t>& out) const {
  const int32_t n = static_cast<int32_t>(word.size());
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    bool alive;
  };
  std::vector<Symbol> symbols(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    symbols[static_cast<size_t>(i)] = {byte_tokens_[static_cast<unsigned char>(word[static_cast<size_t>(i)])], i - 1,
                                       i + 1 < n ? i + 1 : -1, true};
  }
  // Candidates are (rank << 32 | left position) in a min-heap: 8 bytes each, ordered by rank, then leftmost.
  // Ranks are unique per pair, so a popped candidate is current iff its pair still has that rank.
  std::vector<uint64_t> heap;
  heap.reserve(static_cast<size_t>(n));
  auto push_pair = [&](int32_t left) {
    const Symbol& l = symbols[static_cast<size_t>(left)];
    if (l.next < 0) return;
    if (const Merge* m = find(l.id, symbols[static_cast<size_t>(l.next)].id)) {
      heap.push_back((static_cast<uint64_t>(m->rank) << 32) | static_cast<uint32_t>(left));
      std::push_heap(heap.begin(), heap.end(), std::greater<>{});
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
    uint64_t top = heap.back();
    heap.pop_back();
    const int32_t rank = static_cast<int32_t>(top >> 32), pos = static_cast<int32_t>(top & 0xFFFFFFFFu);
    Symbol& left = symbols[static_cast<size_t>(pos)];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[static_cast<size_t>(left.next)];
    const Merge* m = find(left.id, right.id);
    if (m == nullptr || m->rank != rank) continue;  // stale: a symbol changed since it was queued
    left.id = m->result;
    right.alive = false;
    left.next = right.next;
    if (left.next >= 0) symbols[static_cast<size_t>(left.next)].prev = pos;
    if (left.prev >= 0) push_pair(left.prev);
    push_pair(pos);
  }
  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next)
    out.push_back(symbols[static_cast<size_t>(i)].id);
}

}  // namespace nvfp4lm::tokenizer
