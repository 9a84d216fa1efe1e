// The GGUF container and codecs (io/gguf_writer.h, io/gguf_reader.h, io/gguf_quants.h): writer -> reader round
// trips, every codec against its decoding formula and error bound, the NVFP4 repack bit for bit, and the reader's
// refusals (every truncation of a valid file, and one broken thing at a time).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "common/test_util.h"
#include "core/numeric.h"
#include "core/rng.h"
#include "io/gguf_quants.h"
#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"

namespace nvfp4lm::test::test_gguf {
namespace {

using gguf::GgmlType;

std::vector<float> gaussian(int64_t count, uint64_t seed, float scale = 1.0f) {
  Rng rng(seed);
  std::vector<float> values(static_cast<size_t>(count));
  for (float& v : values) v = scale * rng.normal();
  return values;
}

std::vector<float> round_trip(GgmlType type, const std::vector<float>& values) {
  const auto count = static_cast<int64_t>(values.size());
  std::vector<uint8_t> bytes(gguf::row_bytes(type, count, "test"));
  gguf::encode_row(type, values.data(), count, bytes.data());
  std::vector<float> decoded(values.size());
  gguf::decode_row(type, bytes.data(), count, decoded.data());
  return decoded;
}

std::string read_bytes(const fs::path& path) { return read_text_file(path); }

TEST(GgufWriter, RoundTripsMetadataAndTensors) {
  TempDir dir;
  for (const uint64_t alignment : {uint64_t{32}, uint64_t{64}}) {
    const fs::path path = dir / fmt::format("t{}.gguf", alignment);
    GgufWriter writer(alignment);
    writer.add_string("general.architecture", "qwen3");
    writer.add_u32("qwen3.block_count", 36);
    writer.add_i32("x.negative", -7);
    writer.add_f32("qwen3.rope.freq_base", 5e6f);
    writer.add_bool("tokenizer.ggml.add_bos_token", false);
    writer.add_string_array("tokenizer.ggml.tokens", {"a", "Ġb", "<|im_end|>", ""});
    writer.add_i32_array("tokenizer.ggml.token_type", {1, 1, 3, 5});
    const std::vector<float> f32 = gaussian(3 * 5, 1);
    const std::vector<float> q8 = gaussian(2 * 64, 2);
    writer.add_tensor({"a.weight", GgmlType::F32, Shape{3, 5}});
    writer.add_tensor({"b.weight", GgmlType::Q8_0, Shape{2, 64}});
    writer.add_tensor({"c.scale", GgmlType::F32, Shape{1}});
    writer.begin(path, false);
    writer.write("a.weight", f32.data(), 4 * 7);  // in two pieces
    writer.write("a.weight", f32.data() + 7, 4 * 8);
    std::vector<uint8_t> encoded(gguf::row_bytes(GgmlType::Q8_0, 128, "b"));
    gguf::encode_row(GgmlType::Q8_0, q8.data(), 128, encoded.data());
    writer.write("b.weight", encoded.data(), encoded.size());
    const float scale = 0.25f;
    writer.write("c.scale", &scale, 4);
    writer.finish();

    const GgufFile file = GgufFile::open(path);
    EXPECT_EQ(file.version(), 3u);
    EXPECT_EQ(file.alignment(), alignment);
    EXPECT_EQ(file.file_bytes() % alignment, 0u);  // the last tensor is padded too
    EXPECT_EQ(file.string("general.architecture"), "qwen3");
    EXPECT_EQ(file.integer("qwen3.block_count"), 36);
    EXPECT_EQ(file.integer("x.negative"), -7);
    EXPECT_EQ(file.number("qwen3.rope.freq_base"), 5e6);
    EXPECT_EQ(file.find("tokenizer.ggml.add_bos_token")->unsigned_values, std::vector<uint64_t>{0});
    const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    EXPECT_TRUE(tokens->is_array);
    EXPECT_EQ(tokens->strings, (std::vector<std::string>{"a", "Ġb", "<|im_end|>", ""}));
    EXPECT_EQ(file.find("tokenizer.ggml.token_type")->signed_values, (std::vector<int64_t>{1, 1, 3, 5}));
    ASSERT_EQ(file.tensors().size(), 3u);
    const GgufTensorInfo& a = file.tensors()[0];
    EXPECT_EQ(a.shape, (Shape{3, 5}));  // read back in row-major order
    EXPECT_EQ(a.type, "f32");
    EXPECT_EQ(std::memcmp(file.tensor_data(a), f32.data(), 60), 0);
    const GgufTensorInfo& b = *file.find_tensor("b.weight");
    EXPECT_EQ(b.file_offset % alignment, 0u);
    EXPECT_EQ(b.bytes, 2u * 68u);
    EXPECT_EQ(std::memcmp(file.tensor_data(b), encoded.data(), encoded.size()), 0);
    float read_scale;
    std::memcpy(&read_scale, file.tensor_data(*file.find_tensor("c.scale")), 4);
    EXPECT_EQ(read_scale, 0.25f);
  }
}

TEST(GgufWriter, RefusesWritesOutOfOrderOrIncomplete) {
  TempDir dir;
  {
    GgufWriter writer;
    writer.add_tensor({"a", GgmlType::F32, Shape{4}});
    writer.add_tensor({"b", GgmlType::F32, Shape{4}});
    writer.begin(dir / "x.gguf", false);
    const float values[4] = {};
    expect_error([&] { writer.write("b", values, 16); }, {"out of order", "'a'"});
    writer.write("a", values, 16);
    expect_error([&] { writer.write("a", values, 4); }, {"0 remain"});
    expect_error([&] { writer.finish(); }, {"'b'", "not (completely) written"});
  }
  EXPECT_FALSE(fs::exists(dir / "x.gguf"));  // nothing under the final name
  GgufWriter writer;
  expect_error([&] { writer.add_tensor({"q", GgmlType::Q4_0, Shape{2, 48}}); }, {"48", "q4_0", "blocks of 32"});
}

TEST(GgufCodecs, Q8_0DecodesItsFormulaWithinHalfAStep) {
  const std::vector<float> values = gaussian(32 * 40, 3);
  const std::vector<float> decoded = round_trip(GgmlType::Q8_0, values);
  for (size_t block = 0; block < 40; ++block) {
    float amax = 0;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(values[block * 32 + j]));
    const float d = f16_to_float(float_to_f16(amax / 127));
    for (size_t j = 0; j < 32; ++j) {
      const size_t i = block * 32 + j;
      EXPECT_LE(std::fabs(decoded[i] - values[i]), 0.5f * d + 1e-3f * amax) << i;
      EXPECT_EQ(std::remainder(decoded[i], d), 0.0f) << "a multiple of the stored scale " << i;
    }
  }
}

TEST(GgufCodecs, Q4_0MapsTheLargestMagnitudeToCodeZero) {
  std::vector<float> values = gaussian(32 * 30, 4);
  values[5] = -9.0f;  // block 0's largest magnitude, negative
  const std::vector<float> decoded = round_trip(GgmlType::Q4_0, values);
  EXPECT_NEAR(decoded[5], -9.0f, 9.0f * 1e-3f);  // -8 * d, d rounded to f16
  for (size_t block = 0; block < 30; ++block) {
    float amax = 0;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(values[block * 32 + j]));
    for (size_t j = 0; j < 32; ++j) {
      const size_t i = block * 32 + j;
      // Half a step, except that codes reach -8 d but only +7 d: a value more than 7 steps out on the side opposite
      // the block's extreme is clipped to 7 steps (as ggml's quantize_row_q4_0_ref does).
      const float step = amax / 8;
      const float bound = std::max(step * 0.5f, std::fabs(values[i]) - 7 * step);
      EXPECT_LE(std::fabs(decoded[i] - values[i]), bound + amax * 2e-3f) << i;
    }
  }
  // The nibble layout: element j low, element j + 16 high, value (q - 8) * d.
  std::vector<uint8_t> bytes(18);
  gguf::encode_row(GgmlType::Q4_0, values.data(), 32, bytes.data());
  std::vector<float> back(32);
  gguf::decode_row(GgmlType::Q4_0, bytes.data(), 32, back.data());
  const float d = f16_to_float(static_cast<uint16_t>(bytes[0] | (bytes[1] << 8)));
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(back[static_cast<size_t>(j)], static_cast<float>((bytes[2 + j] & 0xF) - 8) * d);
    EXPECT_EQ(back[static_cast<size_t>(j) + 16], static_cast<float>((bytes[2 + j] >> 4) - 8) * d);
  }
}

TEST(GgufCodecs, Q6_KIsWithinHalfAStepOfItsGroup) {
  std::vector<float> values = gaussian(256 * 12, 5);
  for (size_t i = 0; i < 256; ++i) values[i] *= static_cast<float>(1 + i / 16);  // groups of different ranges
  const std::vector<float> decoded = round_trip(GgmlType::Q6_K, values);
  double error = 0, norm = 0;
  for (size_t group = 0; group < values.size() / 16; ++group) {
    float amax = 0;
    for (size_t j = 0; j < 16; ++j) amax = std::max(amax, std::fabs(values[group * 16 + j]));
    for (size_t j = 0; j < 16; ++j) {
      const size_t i = group * 16 + j;
      // A step is amax / 31 up to the int8 and f16 rounding of the scales (a few percent of a step).
      EXPECT_LE(std::fabs(decoded[i] - values[i]), amax / 31 * 0.56f + 1e-6f) << i;
      error += (decoded[i] - values[i]) * (decoded[i] - values[i]);
      norm += values[i] * values[i];
    }
  }
  EXPECT_LT(std::sqrt(error / norm), 0.02);
  EXPECT_EQ(round_trip(GgmlType::Q6_K, std::vector<float>(256, 0.0f)), std::vector<float>(256, 0.0f));
}

TEST(GgufCodecs, FloatTypesRoundToNearestEven) {
  const std::vector<float> values = gaussian(100, 6);
  const std::vector<float> f16 = round_trip(GgmlType::F16, values);
  const std::vector<float> bf16 = round_trip(GgmlType::BF16, values);
  const std::vector<float> f32 = round_trip(GgmlType::F32, values);
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(f16[i], f16_to_float(float_to_f16(values[i])));
    EXPECT_EQ(bf16[i], bf16_to_float(float_to_bf16(values[i])));
    EXPECT_EQ(f32[i], values[i]);
  }
}

TEST(GgufCodecs, Nvfp4RepackIsBitExactBothWays) {
  const int64_t cols = 192;
  Rng rng(7);
  std::vector<uint8_t> codes(cols / 2), scales(cols / 16);
  for (uint8_t& c : codes) c = static_cast<uint8_t>(rng.below(256));
  for (uint8_t& s : scales) s = static_cast<uint8_t>(rng.below(0x7F));  // positive, not NaN
  std::vector<uint8_t> packed(gguf::row_bytes(GgmlType::NVFP4, cols, "w"));
  gguf::repack_nvfp4_row(codes.data(), scales.data(), cols, packed.data(), "w");
  std::vector<uint8_t> codes_back(codes.size()), scales_back(scales.size());
  gguf::unpack_nvfp4_row(packed.data(), cols, codes_back.data(), scales_back.data());
  EXPECT_EQ(codes_back, codes);
  EXPECT_EQ(scales_back, scales);
  // ggml's layout: block b = 4 scale bytes then per group 8 bytes with element j low and j + 8 high; its decoding
  // (twice the e2m1 value times half the scale) is e2m1 * e4m3, the value nvfp4lm's codes mean without the tensor
  // scale.
  std::vector<float> values(cols);
  gguf::decode_row(GgmlType::NVFP4, packed.data(), cols, values.data());
  for (int64_t k = 0; k < cols; ++k) {
    const uint8_t code = (codes[static_cast<size_t>(k / 2)] >> (k % 2 ? 4 : 0)) & 0xF;
    EXPECT_EQ(values[static_cast<size_t>(k)], e2m1_to_float(code) * e4m3_to_float(scales[static_cast<size_t>(k / 16)]))
        << k;
    const int64_t block = k / 64, group = (k % 64) / 16, j = k % 16;
    const uint8_t byte = packed[static_cast<size_t>(block * 36 + 4 + group * 8 + j % 8)];
    EXPECT_EQ(j < 8 ? (byte & 0xF) : (byte >> 4), code) << k;
    EXPECT_EQ(packed[static_cast<size_t>(block * 36 + group)], scales[static_cast<size_t>(k / 16)]);
  }
  scales[3] = 0xB8;  // -1.0: UE4M3 has no sign
  expect_error([&] { gguf::repack_nvfp4_row(codes.data(), scales.data(), cols, packed.data(), "w"); },
               {"w", "0xB8", "unsigned"});
  expect_error([&] { gguf::repack_nvfp4_row(codes.data(), scales.data(), 48, packed.data(), "v"); },
               {"v", "48 columns", "64"});
}

// A small valid file for the reader tests.
std::string small_gguf(const TempDir& dir) {
  GgufWriter writer;
  writer.add_string("general.architecture", "qwen3");
  writer.add_string_array("tokenizer.ggml.tokens", {"x", "y"});
  writer.add_u32("k.one", 1);
  writer.add_u32("k.two", 2);
  writer.add_tensor({"w", GgmlType::Q8_0, Shape{2, 32}});
  writer.add_tensor({"n", GgmlType::F32, Shape{3}});
  writer.begin(dir / "small.gguf", false);
  const std::vector<uint8_t> q8(68, 1);
  const float n[3] = {1, 2, 3};
  writer.write("w", q8.data(), q8.size());
  writer.write("n", n, sizeof n);
  writer.finish();
  return read_bytes(dir / "small.gguf");
}

GgufFile parse(const std::string& bytes) {
  return GgufFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "t.gguf");
}

TEST(GgufReader, EveryTruncationBeforeTheLastByteOfDataIsAnError) {
  TempDir dir;
  const std::string bytes = small_gguf(dir);
  const GgufFile whole = parse(bytes);
  ASSERT_EQ(whole.tensors().size(), 2u);
  const uint64_t end = whole.tensors().back().file_offset + whole.tensors().back().bytes;
  for (size_t size = 0; size < bytes.size(); ++size) {
    if (size < end) {
      EXPECT_THROW(parse(bytes.substr(0, size)), Error) << size;
    } else {
      EXPECT_EQ(parse(bytes.substr(0, size)).tensors().size(), 2u) << size;  // only padding is missing
    }
  }
}

TEST(GgufReader, RefusesBrokenFiles) {
  TempDir dir;
  const std::string good = small_gguf(dir);
  auto with = [&](size_t offset, const std::string& replacement) {
    std::string bytes = good;
    bytes.replace(offset, replacement.size(), replacement);
    return bytes;
  };
  auto le32 = [](uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); };
  auto le64 = [](uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); };
  expect_error([&] { parse(with(0, "GGUG")); }, {"t.gguf", "not a GGUF file"});
  expect_error([&] { parse(with(4, le32(1))); }, {"version 1"});
  expect_error([&] { parse(with(8, le64(uint64_t{1} << 60))); }, {"tensors cannot fit"});
  expect_error([&] { parse(with(16, le64(uint64_t{1} << 60))); }, {"metadata entries cannot fit"});
  // The first key "general.architecture" is at 24 + 8; its value type at 24 + 8 + 20.
  expect_error([&] { parse(with(52, le32(13))); }, {"'general.architecture'", "unknown value type 13"});
  expect_error([&] { parse(with(good.find("k.two"), "k.one")); }, {"'k.one'", "appears twice"});
  const size_t w = good.find(std::string("\x01\x00\x00\x00\x00\x00\x00\x00w", 9));
  ASSERT_NE(w, std::string::npos);
  // w's dims follow its name and rank: {32, 2}; make the row 48 (not whole q8_0 blocks), then the type unknown.
  expect_error([&] { parse(with(w + 9 + 4, le64(48))); }, {"'w'", "48", "q8_0"});
  expect_error([&] { parse(with(w + 9 + 4 + 16, le32(77))); }, {"'w'", "ggml type 77"});
  expect_error([&] { parse(with(w + 9 + 4 + 16 + 4, le64(8))); }, {"'w'", "not a multiple of 32"});
  expect_error([&] { parse(with(w + 9 + 4 + 16 + 4, le64(1 << 20))); }, {"'w'", "past the end"});
  expect_error([&] { parse(with(w + 9, le32(5))); }, {"'w'", "rank 5"});
}

// Parsed metadata costs more than its bytes (a crafted 128 MB file of one u8 array took 1.19 GB, issue 33): past
// 2^22 array elements in all, or 2^20 tensors, a file is refused before anything that size is built.
TEST(GgufReader, RefusesMoreMetadataOrTensorsThanAnyModelHas) {
  auto le32 = [](uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); };
  auto le64 = [](uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); };
  const std::string header = std::string("GGUF", 4) + le32(3);
  // One key "a": an array (9) of u8 (0) with 2^22 + 1 elements, every byte present.
  const uint64_t elements = (uint64_t{1} << 22) + 1;
  std::string big_array = header + le64(0) + le64(1) + le64(1) + "a" + le32(9) + le32(0) + le64(elements);
  big_array.append(elements, '\0');
  expect_error([&] { parse(big_array); }, {"t.gguf", "'a'", "4194304 array elements"});
  // 2^20 + 1 tensors, with bytes enough for their entries.
  const uint64_t tensors = (uint64_t{1} << 20) + 1;
  std::string many_tensors = header + le64(tensors) + le64(0);
  many_tensors.append(tensors * 33, '\0');
  expect_error([&] { parse(many_tensors); }, {"t.gguf", "1048577 tensors", "1048576"});
}

}  // namespace
}  // namespace nvfp4lm::test::test_gguf
