// The stress matrix of stress_kv.h. Lengths sit around the CPU's fused-kernel threshold (kNvfp4FusedMaxRows = 8
// rows: 1, 8 and 9 tokens) and well past it; caches are sized exactly (the last step fills the cache), with room to
// spare (attention over a mostly empty cache, as the CUDA graph's is planned) and, in the full matrix, at the
// context limit.
#include <fmt/format.h>

#include <algorithm>

#include "ops/nvfp4_linear.h"
#include "tools/stress_kv.h"

namespace nvfp4lm {
namespace {

using Kind = StressOp::Kind;

StressOp append(int64_t count) { return {Kind::Append, count}; }
StressOp chat_turn() { return {Kind::ChatTurn, 0}; }
StressOp decode(int64_t count) { return {Kind::Decode, count}; }
StressOp rewind(int64_t length) { return {Kind::Rewind, length}; }
StressOp overflow(int64_t count) { return {Kind::Overflow, count}; }

StressCase prompt_and_decode(int64_t prompt, int64_t steps, int64_t cache) {
  return {fmt::format("prompt {} + decode {}{}", prompt, steps, cache == prompt + steps ? ", cache exactly full" : ""),
          cache,
          {append(prompt), decode(steps)}};
}

void add_short_matrix(std::vector<StressCase>& cases, int64_t largest) {
  constexpr int64_t fused = kNvfp4FusedMaxRows;
  for (const int64_t prompt : {int64_t{1}, fused, fused + 1, int64_t{40}})
    for (const int64_t steps : {int64_t{1}, int64_t{8}})
      cases.push_back(prompt_and_decode(prompt, steps, prompt + steps));
  cases.push_back({"full cache: one token more is refused, then rewind 2 and decode",
                   12,
                   {append(6), decode(6), overflow(1), rewind(10), decode(2), overflow(1)}});
  cases.push_back(
      {"one slot left: two tokens are refused, one fits", 12, {append(6), decode(5), overflow(2), decode(1)}});
  cases.push_back({"rewind into the generated tokens", 64, {append(20), decode(8), rewind(23), decode(6)}});
  cases.push_back(
      {"rewind into the prompt, other tokens appended", 64, {append(20), decode(8), rewind(10), append(6), decode(4)}});
  cases.push_back({"rewind to empty, start again", 32, {append(12), decode(4), rewind(0), append(5), decode(3)}});
  cases.push_back(
      {"repeated rewinds",
       48,
       {append(9), decode(4), rewind(11), decode(4), rewind(5), append(3), decode(4), rewind(8), decode(2)}});
  cases.push_back({"chunks of 3, 9, 1 and 8 tokens", 64, {append(3), append(9), append(1), append(8), decode(3)}});
  cases.push_back({"three chat turns", 256, {chat_turn(), decode(6), chat_turn(), decode(6), chat_turn(), decode(4)}});
  if (largest >= 64) {
    cases.push_back({fmt::format("prompt 20 + decode 8 in a cache of {}", std::min<int64_t>(1024, largest)),
                     std::min<int64_t>(1024, largest),
                     {append(20), decode(8)}});
  }
}

void add_full_matrix(std::vector<StressCase>& cases, int64_t largest) {
  const int64_t prompts[] = {1, 2, 7, 8, 9, 16, 31, 64, 257};
  const int64_t steps[] = {1, 2, 16, 64};
  for (const int64_t prompt : prompts)
    for (const int64_t step : steps) {
      cases.push_back(prompt_and_decode(prompt, step, prompt + step));
      cases.push_back(prompt_and_decode(prompt, step, 2 * (prompt + step) + 7));
    }
  for (const int64_t back : {int64_t{0}, int64_t{1}, int64_t{23}, int64_t{24}, int64_t{25}, int64_t{31}})
    cases.push_back({fmt::format("prompt 24 + decode 8, rewind to {}, append 5 + decode 4", back),
                     64,
                     {append(24), decode(8), rewind(back), append(5), decode(4)}});
  std::vector<StressOp> turns;
  for (int turn = 0; turn < 5; ++turn) {
    turns.push_back(chat_turn());
    turns.push_back(decode(16));
  }
  cases.push_back({"five chat turns", 512, turns});
  cases.push_back({"five chat turns, the third rewound and asked again",
                   512,
                   {chat_turn(), decode(16), chat_turn(), decode(16), rewind(40), chat_turn(), decode(16), chat_turn(),
                    decode(16)}});
  // The context limit (or --max-cache): filled exactly, then one token more, then a rewind and the end again.
  if (largest < 256) return;  // the cases above cover a limit this small
  cases.push_back({fmt::format("cache of {} (the limit): prompt {} + decode 8, one more refused", largest, largest - 8),
                   largest,
                   {append(largest - 8), decode(8), overflow(1), rewind(largest - 4), decode(4), overflow(1)}});
  cases.push_back({fmt::format("cache of {} (the limit): three chat turns", largest),
                   largest,
                   {chat_turn(), decode(16), chat_turn(), decode(16), chat_turn(), decode(16)}});
}

}  // namespace

std::vector<StressCase> stress_kv_cases(int64_t context, bool full, int64_t max_cache) {
  const int64_t largest = max_cache > 0 ? std::min(context, max_cache) : context;
  std::vector<StressCase> cases;
  add_short_matrix(cases, largest);
  if (full) add_full_matrix(cases, largest);
  // A case needs a cache the model can address and ops that fit it.
  std::erase_if(cases, [&](const StressCase& c) { return c.cache_tokens > largest || c.cache_tokens < 2; });
  return cases;
}

}  // namespace nvfp4lm
