#include "tokenizer_checks.h"

#include <algorithm>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "tokenizer/chat.h"
#include "tokenizer/nfc.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer_files.h"
#include "tokenizer/utf8.h"

namespace nvfp4lm::fuzz {

const Tokenizer& bundled_qwen3() {
  static const Tokenizer qwen3 = Tokenizer::load(bundled_qwen3_tokenizer_dir());
  return qwen3;
}

namespace {

void check_ids_in_range(const Tokenizer& tokenizer, std::span<const int32_t> ids, std::string_view what) {
  for (int32_t id : ids) {
    FUZZ_CHECK(id >= 0 && static_cast<size_t>(id) < tokenizer.vocab_size(), "{}: id {} outside [0, {})", what, id,
               tokenizer.vocab_size());
  }
}

std::string stream_decode(const Tokenizer& tokenizer, std::span<const int32_t> ids, bool skip_special) {
  StreamingDecoder stream(tokenizer, skip_special);
  std::string text;
  for (int32_t id : ids) {
    const std::string piece = stream.push(id);
    FUZZ_CHECK(tokenizer::is_valid_utf8(piece), "streaming decoder returned invalid UTF-8 after id {}", id);
    FUZZ_CHECK(stream.pending_bytes() <= 3, "streaming decoder holds {} bytes", stream.pending_bytes());
    text += piece;
  }
  text += stream.finish();
  return text;
}

}  // namespace

void check_decode(const Tokenizer& tokenizer, std::span<const int32_t> ids, bool skip_special) {
  std::string text;
  if (!expect_error_only([&] { text = tokenizer.decode(ids, skip_special); })) return;
  FUZZ_CHECK(tokenizer::is_valid_utf8(text), "decode returned invalid UTF-8");
  const std::string streamed = stream_decode(tokenizer, ids, skip_special);
  FUZZ_CHECK(streamed == text, "streaming decode '{}' differs from decode '{}'", streamed, text);
}

void check_round_trip(const Tokenizer& tokenizer, std::string_view text, bool allow_special) {
  const std::vector<int32_t> ids = tokenizer.encode(text, allow_special);
  check_ids_in_range(tokenizer, ids, "encode");
  // Added tokens are cut out before the rest is normalized, piece by piece (as HF does), so decode(encode(text)) is
  // canonically equivalent to the text, not always its NFC: "<|im_end|>" + U+0338 keeps the combining mark apart,
  // where NFC of the whole text composes ">" + U+0338 into U+226F.
  const std::string decoded = tokenizer.decode(ids);
  const bool nfc = tokenizer.normalizes_nfc();
  FUZZ_CHECK(nfc ? tokenizer::nfc(decoded) == tokenizer::nfc(text) : decoded == text,
             "decode(encode(text)) is not the text ({} vs {} bytes{})", decoded.size(), text.size(),
             nfc ? ", compared in NFC" : "");
  FUZZ_CHECK(stream_decode(tokenizer, ids, false) == decoded, "streaming decode differs from decode");

  const EncodedText with_offsets = tokenizer.encode_with_offsets(text, allow_special);
  FUZZ_CHECK(with_offsets.ids == ids, "encode_with_offsets gives other ids than encode");
  FUZZ_CHECK(with_offsets.offsets.size() == ids.size(), "{} offsets for {} ids", with_offsets.offsets.size(),
             ids.size());
  uint32_t previous_begin = 0;
  for (const auto& [begin, end] : with_offsets.offsets) {
    FUZZ_CHECK(begin <= end && end <= text.size(), "offset [{}, {}) outside the {}-byte text", begin, end, text.size());
    FUZZ_CHECK(begin >= previous_begin, "offsets go backwards: {} after {}", begin, previous_begin);
    previous_begin = begin;
  }
}

void exercise_tokenizer(const Tokenizer& tokenizer) {
  static const std::string kProbes[] = {
      "Hello world! 123 4567 don't",
      "  leading   spaces\n\n\ttabs\r\n",
      "\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c",  // CJK
      "\xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd",              // emoji with a modifier
      "e\xcc\x81 A\xcc\x8a",                                           // combining marks (NFC composes them)
      "<|im_start|>user\nhi<|im_end|>\n<|endoftext|><think></think>",
      "",
  };
  for (const std::string& probe : kProbes) {
    for (bool allow_special : {true, false}) {
      std::vector<int32_t> ids;
      if (!expect_error_only([&] { ids = tokenizer.encode(probe, allow_special); })) continue;
      check_ids_in_range(tokenizer, ids, "encode");
      check_decode(tokenizer, ids, false);
      check_decode(tokenizer, ids, true);
    }
  }
  const ChatMessage conversation[] = {
      {"system", "Be brief."}, {"user", "Hi?"}, {"assistant", "<think>x</think>Hello."}};
  // The tokenizer's own chat template (fuzzed too): parsed and run, or an Error; never a crash.
  expect_error_only([&] {
    for (const EncodedChat& chat : encode_chat(tokenizer, ChatTemplate::resolve(tokenizer), conversation)) {
      FUZZ_CHECK(chat.ids.size() == chat.train_mask.size(), "chat: {} ids, {} mask entries", chat.ids.size(),
                 chat.train_mask.size());
      check_ids_in_range(tokenizer, chat.ids, "encode_chat");
    }
  });
  const size_t probe_ids = std::min<size_t>(tokenizer.vocab_size(), 1024);
  for (size_t id = 0; id < probe_ids; ++id) {
    const int32_t one[] = {static_cast<int32_t>(id)};
    check_decode(tokenizer, one, false);
    expect_error_only([&] {
      (void)tokenizer.token_text(one[0]);
      (void)tokenizer.token_bytes(one[0]);
    });
  }
  (void)tokenizer.special_ids();
}

}  // namespace nvfp4lm::fuzz
