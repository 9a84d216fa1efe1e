// `.dat` format: LEB128 encoding, writer -> reader round trips for every element type (zero-copy and converting
// paths), and bad input: truncation at every byte, LEB128 overflow, unknown types, absurd shapes and counts,
// duplicate keys, trailing bytes. Every error must name the file, the entry and the byte offset.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "common/test_util.h"
#include "core/numeric.h"
#include "io/dat_format.h"
#include "io/io_test_util.h"

namespace nvfp4lm::test::test_dat_format {
namespace {

std::string leb(uint64_t value) {
  std::string out;
  append_leb128(out, value);
  return out;
}

// One raw entry (no validation).
std::string raw_entry(const std::string& key, uint64_t type, const std::vector<uint64_t>& dims,
                      const std::string& payload) {
  std::string out = leb(key.size()) + key + leb(type) + leb(dims.size());
  for (uint64_t d : dims) out += leb(d);
  return out + payload;
}

TEST(Leb128, EncodesBoundaryValues) {
  EXPECT_EQ(leb(0), std::string(1, '\0'));
  EXPECT_EQ(leb(127), std::string(1, '\x7f'));
  EXPECT_EQ(leb(128), std::string("\x80\x01", 2));
  EXPECT_EQ(leb(300), std::string("\xac\x02", 2));
  EXPECT_EQ(leb(std::numeric_limits<uint64_t>::max()).size(), 10u);
}

TEST(Leb128, ReaderDecodesWhatTheWriterEncodes) {
  // The entry count and the dims go through the reader's decoder; 2^35 + 5 needs 6 bytes.
  TempDir dir;
  const fs::path path = dir / "dims.dat";
  write_file(path, leb(1) + raw_entry("z", 0, {(uint64_t{1} << 35) + 5, 0}, ""));
  const auto file = DatFile::open(path);
  ASSERT_EQ(file->entries().size(), 1u);
  EXPECT_EQ(file->entries()[0].dims, (std::vector<int64_t>{(int64_t{1} << 35) + 5, 0}));
}

TEST(DatFormat, RoundTripEveryWritableType) {
  TempDir dir;
  const fs::path path = dir / "all.dat";
  Rng rng(7);
  const Tensor f32 = random_normal({3, 5}, rng);
  Tensor bf16 = Tensor::empty({3, 5}, DType::BF16);
  convert_cpu(f32, bf16);
  Tensor f16 = Tensor::empty({15}, DType::F16);
  convert_cpu(f32.reshape({15}), f16);
  const Tensor i32 = Tensor::from_ints({1, -2, 3, 2147483647}, {2, 2});
  Tensor i64 = Tensor::empty({2}, DType::I64);
  i64.data<int64_t>()[0] = int64_t{1} << 40;
  i64.data<int64_t>()[1] = -5;
  Tensor u8 = Tensor::empty({4}, DType::U8);
  for (int i = 0; i < 4; ++i) u8.data<uint8_t>()[i] = static_cast<uint8_t>(250 + i);
  Tensor i8 = Tensor::empty({3}, DType::I8);
  for (int i = 0; i < 3; ++i) i8.data<int8_t>()[i] = static_cast<int8_t>(-100 + 90 * i);
  Tensor fp4 = Tensor::empty({2, 8}, DType::E2M1x2);
  Tensor e4m3 = Tensor::empty({2, 1}, DType::E4M3);
  for (int i = 0; i < 16; ++i) static_cast<uint8_t*>(fp4.raw())[i] = static_cast<uint8_t>(i * 17);
  static_cast<uint8_t*>(e4m3.raw())[0] = 0x38;
  static_cast<uint8_t*>(e4m3.raw())[1] = 0x7E;
  const Tensor scalar = Tensor::from_floats({42.5f}, Shape{});

  const std::vector<std::pair<std::string, Tensor>> entries = {
      {"odd.key.first", u8}, {"bf16", bf16},     {"f32", f32}, {"f16", f16},
      {"i32", i32},          {"i64", i64},       {"i8", i8},   {"w.qdata", fp4},
      {"w.scale", e4m3},     {"scalar", scalar}, {"ключ", i32}};
  {
    DatWriter writer(path, entries.size());
    for (const auto& [key, tensor] : entries) writer.write(key, tensor);
    writer.finish();
  }
  const auto file = DatFile::open(path);
  ASSERT_EQ(file->entries().size(), entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& [key, expected] = entries[i];
    const DatEntry& entry = file->entries()[i];
    EXPECT_EQ(entry.key, key);
    EXPECT_EQ(entry.index, i);
    EXPECT_EQ(entry.type, dat_type_of(expected.dtype())) << key;
    EXPECT_EQ(entry.shape(), expected.shape()) << key;
    const Tensor got = file->tensor(entry);
    EXPECT_EQ(got.dtype(), expected.dtype()) << key;
    ASSERT_EQ(got.nbytes(), expected.nbytes()) << key;
    EXPECT_EQ(std::memcmp(got.raw(), expected.raw(), got.nbytes()), 0) << key;
  }
  EXPECT_EQ(file->at("w.qdata").type, DatType::E2M1x2);
  EXPECT_EQ(file->at("w.scale").type, DatType::E4M3);
  expect_error([&] { file->at("nope"); }, {path.string(), "'nope'"});
}

TEST(DatFormat, ConvertsTypesWithoutADType) {
  TempDir dir;
  const fs::path path = dir / "convert.dat";
  std::string i16(4, '\0'), f64(16, '\0');
  const int16_t shorts[2] = {-3, 300};
  const double doubles[2] = {0.1, -1e300};
  std::memcpy(i16.data(), shorts, 4);
  std::memcpy(f64.data(), doubles, 16);
  write_file(path, leb(3) + raw_entry("s", 2, {2}, i16) + raw_entry("d", 7, {2}, f64) +
                       raw_entry("b", 11, {3}, std::string("\x01\x00\x01", 3)));
  const auto file = DatFile::open(path);
  const Tensor s = file->tensor(file->at("s"));
  EXPECT_EQ(s.dtype(), DType::I32);
  EXPECT_EQ(s.data<int32_t>()[0], -3);
  EXPECT_EQ(s.data<int32_t>()[1], 300);
  const Tensor d = file->tensor(file->at("d"));
  EXPECT_EQ(d.dtype(), DType::F32);
  EXPECT_EQ(d.data<float>()[0], 0.1f);
  EXPECT_TRUE(std::isinf(d.data<float>()[1]));
  const Tensor b = file->tensor(file->at("b"));
  EXPECT_EQ(b.dtype(), DType::U8);
  EXPECT_EQ(b.data<uint8_t>()[2], 1);
}

TEST(DatFormat, MisalignedPayloadsAreCopiedNotViewed) {
  TempDir dir;
  const fs::path path = dir / "misaligned.dat";
  // Key "k" puts the payload at byte offset 6: not 4-byte aligned.
  std::string payload(8, '\0');
  const float values[2] = {1.25f, -7.5f};
  std::memcpy(payload.data(), values, 8);
  write_file(path, leb(1) + raw_entry("k", 6, {2}, payload));
  const auto file = DatFile::open(path);
  EXPECT_EQ(file->at("k").offset % 4, 2u);
  const Tensor t = file->tensor(file->at("k"));
  EXPECT_TRUE(t.storage()->owned());
  EXPECT_EQ(to_float_vector(t), (std::vector<float>{1.25f, -7.5f}));
}

TEST(DatFormat, WriterChecksCountsAndSizes) {
  TempDir dir;
  const fs::path path = dir / "w.dat";
  {
    DatWriter writer(path, 2);
    writer.begin_entry("a", DatType::F32, {2});
    writer.write_bytes("\0\0\0\0", 4);
    expect_error([&] { writer.begin_entry("b", DatType::U8, {1}); }, {"'a'", "missing 4 payload bytes"});
    writer.write_bytes("\0\0\0\0", 4);
    expect_error([&] { writer.write_bytes("x", 1); }, {"'a'", "only 0 remain"});
    expect_error([&] { writer.begin_entry("a", DatType::U8, {1}); }, {"'a'", "twice"});
    expect_error([&] { writer.finish(); }, {"1 entries written but 2 declared"});
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

// ---- bad input --------------------------------------------------------------------------------------------------

class DatBadInput : public ::testing::Test {
 protected:
  std::string open_error(const std::string& bytes) {
    write_file(path_, bytes);
    const std::string message = error_message([&] { DatFile::open(path_); });
    EXPECT_NE(message.find(path_.string()), std::string::npos) << message;
    return message;
  }
  void expect_open_error(const std::string& bytes, std::initializer_list<std::string> parts) {
    const std::string message = open_error(bytes);
    for (const auto& part : parts)
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  }
  TempDir dir_;
  fs::path path_ = dir_ / "bad.dat";
};

TEST_F(DatBadInput, EveryTruncationIsAnError) {
  const std::string valid = leb(2) + raw_entry("model.norm.weight", 6, {2, 3}, std::string(24, '\x01')) +
                            raw_entry("x.qdata", 100, {1, 8}, std::string(8, '\x22'));
  write_file(path_, valid);
  ASSERT_EQ(DatFile::open(path_)->entries().size(), 2u);
  for (size_t length = 0; length < valid.size(); ++length) {
    const std::string message = open_error(valid.substr(0, length));
    EXPECT_NE(message.find("byte offset"), std::string::npos) << "length " << length << ": " << message;
  }
}

TEST_F(DatBadInput, NamesEntryKeyAndOffset) {
  const std::string first = raw_entry("a", 0, {1}, "x");
  // Second entry claims 1000 f32 elements but has 4 bytes.
  expect_open_error(leb(2) + first + raw_entry("model.layers.0.mlp.up_proj.qdata", 6, {1000}, "abcd"),
                    {"entry 1", "'model.layers.0.mlp.up_proj.qdata'", "byte offset", "needs 4000 payload bytes"});
}

TEST_F(DatBadInput, Leb128Overflow) {
  // 11 continuation bytes: longer than any 64-bit value.
  expect_open_error(std::string(11, '\x80') + '\x01', {"entry count", "byte offset 0", "longer than 10 bytes"});
  // 10th byte carries more than bit 63.
  expect_open_error(std::string(9, '\xff') + '\x02', {"entry count", "overflows 64 bits"});
  // A dim that overflows, inside an entry.
  expect_open_error(leb(1) + leb(1) + "k" + leb(0) + leb(1) + std::string(9, '\xff') + '\x7f',
                    {"entry 0 ('k') dim 0", "overflows"});
}

TEST_F(DatBadInput, AbsurdCountsAndShapes) {
  expect_open_error(leb(uint64_t{1} << 60) + "abcd", {"entry count", "cannot fit"});
  expect_open_error(leb(1) + raw_entry("k", 6, {uint64_t{1} << 30, uint64_t{1} << 30}, ""), {"'k'", "2^50"});
  // Empty, yet absurd: a zero dim does not excuse the others (their strides would overflow).
  expect_open_error(leb(1) + raw_entry("k", 6, {0, uint64_t{1} << 30, uint64_t{1} << 30, uint64_t{1} << 30}, ""),
                    {"'k'", "2^50"});
  expect_open_error(leb(1) + raw_entry("k", 6, {uint64_t{1} << 55}, ""), {"'k'", "absurd"});
  expect_open_error(leb(1) + raw_entry("k", 6, {1, 1, 1, 1, 1}, ""), {"'k'", "5 dimensions"});
  expect_open_error(leb(1) + leb(uint64_t{1} << 40) + "k", {"entry 0", "key length"});
  expect_open_error(leb(1) + leb(0) + "abcdef", {"entry 0", "key length 0"});
}

TEST_F(DatBadInput, UnknownTypeDuplicateKeyTrailingBytesBadUtf8) {
  expect_open_error(leb(1) + raw_entry("k", 9, {1}, "x"), {"'k'", "unknown element type 9"});
  expect_open_error(leb(2) + raw_entry("k", 0, {1}, "x") + raw_entry("k", 0, {1}, "y"),
                    {"entry 1 ('k')", "repeats the key of entry 0"});
  expect_open_error(leb(1) + raw_entry("k", 0, {1}, "x") + "junk", {"4 unexpected bytes", "byte offset"});
  expect_open_error(leb(1) + raw_entry("\xff\xfe", 0, {1}, "x"), {"entry 0", "UTF-8"});
  expect_open_error("", {"entry count", "truncated"});
}

}  // namespace
}  // namespace nvfp4lm::test::test_dat_format
