// safetensors writer -> reader round trips (every dtype, rank 0, empty tensors, pieces, shards) and every kind
// of bad input the reader must reject with an Error naming the file and the problem.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "io/io_test_util.h"
#include "io/safetensors_reader.h"
#include "io/safetensors_writer.h"

namespace nvfp4lm::test::test_safetensors {
namespace {

using json = nlohmann::json;

// A tensor of `dtype` whose bytes are a recognisable pattern.
Tensor pattern_tensor(const Shape& shape, DType dtype, uint8_t seed) {
  Tensor t = Tensor::empty(shape, dtype);
  auto* bytes = static_cast<uint8_t*>(t.raw());
  for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(seed + 31 * i + (i >> 7));
  return t;
}

TEST(Safetensors, RoundTripEveryDtypeRankZeroAndEmpty) {
  TempDir dir;
  const fs::path path = dir / "all.safetensors";
  struct Case {
    std::string name;
    DType dtype;
    Shape shape;
  };
  const std::vector<Case> cases = {
      {"f32", DType::F32, Shape{3, 5}}, {"bf16", DType::BF16, Shape{7}},      {"f16", DType::F16, Shape{2, 3, 4}},
      {"u8", DType::U8, Shape{9}},      {"i8", DType::I8, Shape{1, 1, 1, 3}}, {"i32", DType::I32, Shape{4, 1}},
      {"i64", DType::I64, Shape{3}},    {"e4m3", DType::E4M3, Shape{2, 8}},   {"fp4", DType::E2M1x2, Shape{2, 4}},
      {"scalar", DType::F32, Shape{}},  {"empty", DType::BF16, Shape{0, 5}},  {"scalar_i64", DType::I64, Shape{}},
  };
  std::vector<SafetensorsEntrySpec> specs;
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < cases.size(); ++i) {
    specs.push_back({cases[i].name, cases[i].dtype, cases[i].shape});
    tensors.push_back(pattern_tensor(cases[i].shape, cases[i].dtype, static_cast<uint8_t>(i * 17)));
  }
  {
    SafetensorsWriter writer(path, specs, {{"format", "pt"}, {"note", "test"}});
    for (size_t i = 0; i < cases.size(); ++i) writer.write(cases[i].name, tensors[i]);
    writer.finish();
  }
  // Header: 8-byte aligned data start, declared order, __metadata__ first.
  const std::string raw = read_file(path);
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, raw.data(), 8);
  EXPECT_EQ((8 + header_bytes) % 8, 0u);
  const std::string header = raw.substr(8, header_bytes);
  EXPECT_EQ(header.rfind("{\"__metadata__\"", 0), 0u) << header;
  EXPECT_LT(header.find("\"f32\""), header.find("\"bf16\""));
  EXPECT_NE(header.find("\"fp4\":{\"dtype\":\"U8\""), std::string::npos) << "E2M1x2 must be stored as U8: " << header;
  EXPECT_NE(header.find("\"scalar\":{\"dtype\":\"F32\",\"shape\":[]"), std::string::npos) << header;

  const auto file = SafetensorsFile::open(path);
  EXPECT_EQ(file->metadata().at("format"), "pt");
  EXPECT_EQ(file->metadata().at("note"), "test");
  ASSERT_EQ(file->entries().size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const SafetensorsEntry& entry = file->at(cases[i].name);
    const DType stored = cases[i].dtype == DType::E2M1x2 ? DType::U8 : cases[i].dtype;
    EXPECT_EQ(entry.dtype, stored) << cases[i].name;
    EXPECT_EQ(entry.shape, cases[i].shape) << cases[i].name;
    const Tensor view = file->tensor(entry);
    const Tensor copy = file->read(entry);
    EXPECT_EQ(view.shape().rank(), cases[i].shape.rank());
    EXPECT_TRUE(same_bytes(view, tensors[i])) << cases[i].name;
    EXPECT_TRUE(same_bytes(copy, tensors[i])) << cases[i].name;
    file->drop_pages(entry);
    EXPECT_TRUE(same_bytes(file->tensor(entry), tensors[i])) << cases[i].name << " after drop_pages";
  }
  // Non-empty views are zero-copy: they alias the mapping rather than owned storage.
  EXPECT_FALSE(file->tensor("f32").storage()->owned());
  EXPECT_TRUE(file->read(file->at("f32")).storage()->owned());
}

TEST(Safetensors, ViewsOutliveTheFileObject) {
  TempDir dir;
  const fs::path path = dir / "a.safetensors";
  const Tensor values = Tensor::from_floats({1.5f, -2.0f, 3.25f}, {3});
  {
    SafetensorsWriter writer(path, {{"x", DType::F32, Shape{3}}});
    writer.write("x", values);
    writer.finish();
  }
  Tensor view;
  {
    const auto file = SafetensorsFile::open(path);
    view = file->tensor("x");
  }
  EXPECT_EQ(to_float_vector(view), (std::vector<float>{1.5f, -2.0f, 3.25f}));
}

TEST(Safetensors, WritesInPiecesAndStridedTensors) {
  TempDir dir;
  const fs::path path = dir / "pieces.safetensors";
  const Tensor matrix = Tensor::from_floats({1, 2, 3, 4, 5, 6}, {2, 3});
  {
    SafetensorsWriter writer(path, {{"t", DType::F32, Shape{3, 2}}, {"p", DType::F32, Shape{4}}});
    writer.write("t", matrix.transpose(0, 1));  // non-contiguous source
    const float values[4] = {9, 8, 7, 6};
    writer.write_bytes("p", values, 8);
    writer.write_bytes("p", values + 2, 8);
    writer.finish();
  }
  const auto file = SafetensorsFile::open(path);
  EXPECT_EQ(to_float_vector(file->tensor("t")), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(to_float_vector(file->tensor("p")), (std::vector<float>{9, 8, 7, 6}));
}

TEST(Safetensors, WriterEnforcesOrderSizesAndCleansUp) {
  TempDir dir;
  const fs::path path = dir / "w.safetensors";
  const Tensor two = Tensor::from_floats({1, 2}, {2});
  {
    SafetensorsWriter writer(path, {{"a", DType::F32, Shape{2}}, {"b", DType::F32, Shape{2}}});
    expect_error([&] { writer.write("b", two); }, {"'b'", "next tensor to write is 'a'"});
    expect_error([&] { writer.write("a", Tensor::from_floats({1, 2, 3}, {3})); }, {"'a'", "declared"});
    writer.write("a", two);
    expect_error([&] { writer.finish(); }, {"'b'", "not (completely) written"});
    // Destroyed without finish(): neither the file nor its temporary remains.
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_empty(dir.path()));
  expect_error(
      [&] {
        SafetensorsWriter w(path, {{"a", DType::F32, Shape{2}}, {"a", DType::F32, Shape{2}}});
      },
      {"'a'", "twice"});
  write_file(path, "existing");
  expect_error([&] { SafetensorsWriter w(path, {{"a", DType::F32, Shape{2}}}); }, {path.string(), "--overwrite"});
  EXPECT_EQ(read_file(path), "existing");
}

// ---- bad input --------------------------------------------------------------------------------------------------

class SafetensorsBadInput : public ::testing::Test {
 protected:
  fs::path file(const std::string& header, const std::string& data) {
    write_raw_safetensors(path_, header, data);
    return path_;
  }
  void expect_open_error(std::initializer_list<std::string> parts) {
    std::vector<std::string> all(parts);
    all.push_back(path_.string());
    const std::string message = error_message([&] { SafetensorsFile::open(path_); });
    for (const auto& part : all)
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  }
  TempDir dir_;
  fs::path path_ = dir_ / "bad.safetensors";
};

TEST_F(SafetensorsBadInput, TooShortForTheLength) {
  write_file(path_, "abc");
  expect_open_error({"too short"});
}

TEST_F(SafetensorsBadInput, HeaderLengthPastTheEnd) {
  write_file(path_, le64(1000) + "{}");
  expect_open_error({"header length 1000", "past the end"});
}

TEST_F(SafetensorsBadInput, AbsurdHeaderLength) {
  write_file(path_, le64(uint64_t{1} << 62) + "{}");
  expect_open_error({"header length", "past the end"});
}

TEST_F(SafetensorsBadInput, TruncatedData) {
  file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", std::string(8, '\0'));
  expect_open_error({"'a'", "past the end of the data area"});
}

TEST_F(SafetensorsBadInput, BadJson) {
  file(R"({"a":{"dtype":"F32",)", "");
  expect_open_error({"not valid JSON"});
}

TEST_F(SafetensorsBadInput, NotAnObject) {
  file("[1, 2]", "");
  expect_open_error({"must be a JSON object"});
}

TEST_F(SafetensorsBadInput, UnsupportedDtype) {
  file(R"({"weights.x":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", std::string(8, '\0'));
  expect_open_error({"'weights.x'", "F64", "not supported"});
}

TEST_F(SafetensorsBadInput, SizeMismatch) {
  file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0'));
  expect_open_error({"'a'", "needs 12 bytes", "span 8"});
}

TEST_F(SafetensorsBadInput, OffsetsPastTheEnd) {
  file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[100,104]}})", std::string(8, '\0'));
  expect_open_error({"'a'", "past the end"});
}

TEST_F(SafetensorsBadInput, OffsetsReversed) {
  file(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})", std::string(8, '\0'));
  expect_open_error({"'a'", "end before they begin"});
}

TEST_F(SafetensorsBadInput, Overlap) {
  file(R"({"a":{"dtype":"U8","shape":[6],"data_offsets":[0,6]},"b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
       std::string(8, '\0'));
  expect_open_error({"'a'", "'b'", "overlap"});
}

TEST_F(SafetensorsBadInput, HugeShape) {
  // 2^60 elements: must be rejected before anything multiplies or allocates.
  file(R"({"a":{"dtype":"F32","shape":[1073741824,1073741824],"data_offsets":[0,8]}})", std::string(8, '\0'));
  expect_open_error({"'a'", "2^50"});
}

TEST_F(SafetensorsBadInput, ShapeOverflowingUint64) {
  file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}})",
       std::string(8, '\0'));
  expect_open_error({"'a'"});
}

TEST_F(SafetensorsBadInput, NegativeOrFractionalDims) {
  file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", std::string(4, '\0'));
  expect_open_error({"'a'", "non-negative integer"});
  file(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", std::string(4, '\0'));
  expect_open_error({"'a'", "non-negative integer"});
}

TEST_F(SafetensorsBadInput, RankFive) {
  file(R"({"a":{"dtype":"U8","shape":[1,1,1,1,1],"data_offsets":[0,1]}})", std::string(8, '\0'));
  expect_open_error({"'a'", "rank 5"});
}

TEST_F(SafetensorsBadInput, DuplicateNames) {
  file(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
       std::string(8, '\0'));
  expect_open_error({"'a'", "twice"});
}

TEST_F(SafetensorsBadInput, MissingFieldsAndNonStringMetadata) {
  file(R"({"a":{"dtype":"U8","data_offsets":[0,1]}})", std::string(8, '\0'));
  expect_open_error({"'a'", "shape"});
  file(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", std::string(8, '\0'));
  expect_open_error({"'a'", "data_offsets"});
  file(R"({"__metadata__":{"format":7}})", "");
  expect_open_error({"__metadata__", "format"});
}

TEST_F(SafetensorsBadInput, MissingFileAndNotARegularFile) {
  expect_error([&] { SafetensorsFile::open(dir_ / "nope.safetensors"); }, {"nope.safetensors"});
  expect_error([&] { SafetensorsFile::open(dir_.path()); }, {"directory"});
}

// The reference implementation's rule: the tensors tile the data area exactly. A header length cut inside the
// header's padding still parses, and every tensor would be read shifted; trailing bytes belong to no tensor.
TEST_F(SafetensorsBadInput, TensorsMustTileTheDataArea) {
  const std::string header = R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}})";
  const std::string padding(6, ' ');
  for (size_t cut = 1; cut <= padding.size(); ++cut) {
    write_file(path_, le64(header.size() + padding.size() - cut) + header + padding + "abc");
    expect_open_error({"end at byte 3", "corrupt"});
  }
  file(header + padding, "abc");
  EXPECT_EQ(SafetensorsFile::open(path_)->entries().size(), 1u);
  file(header + padding, "abcxyz");
  expect_open_error({"tensors end at byte 3", "6 bytes", "trailing"});
  file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}})",
       std::string(6, '\0'));
  expect_open_error({"bytes 2..4", "belong to no tensor", "'b'"});
  file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})", std::string(4, '\0'));
  expect_open_error({"bytes 0..2", "belong to no tensor"});
}

TEST_F(SafetensorsBadInput, DeeplyNestedHeader) {
  // 200 KB of brackets: a stack overflow in nlohmann's recursion before the parse-time depth limit.
  file(std::string(100000, '[') + std::string(100000, ']'), "");
  expect_open_error({"not valid JSON", "nested deeper than"});
  file(R"({"__metadata__":{"x":)" + std::string(100000, '[') + std::string(100000, ']') + "}}", "");
  expect_open_error({"nested deeper than"});
}

TEST_F(SafetensorsBadInput, FifoIsRefusedNotWaitedOn) {
  const fs::path fifo = dir_ / "fifo.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_error([&] { SafetensorsFile::open(fifo); }, {"fifo.safetensors", "FIFO"});
}

// ---- sharded sets -----------------------------------------------------------------------------------------------

void write_shard(const fs::path& path, const std::vector<std::pair<std::string, float>>& scalars) {
  std::vector<SafetensorsEntrySpec> specs;
  for (const auto& [name, value] : scalars) specs.push_back({name, DType::F32, Shape{}});
  SafetensorsWriter writer(path, specs);
  for (const auto& [name, value] : scalars) writer.write_bytes(name, &value, 4);
  writer.finish();
}

void write_index(const fs::path& path, const json& weight_map) {
  write_file(path, json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump());
}

float scalar(const Tensor& t) { return to_float_vector(t).at(0); }

TEST(SafetensorsSet, ShardedIndexRoundTrip) {
  TempDir dir;
  write_shard(dir / "s1.safetensors", {{"a", 1.0f}, {"b", 2.0f}});
  write_shard(dir / "s2.safetensors", {{"c", 3.0f}});
  write_index(dir / "model.safetensors.index.json",
              {{"a", "s1.safetensors"}, {"b", "s1.safetensors"}, {"c", "s2.safetensors"}});
  const SafetensorsSet set = SafetensorsSet::open_dir(dir.path());
  EXPECT_EQ(set.files().size(), 2u);
  EXPECT_EQ(set.names().size(), 3u);
  EXPECT_EQ(scalar(set.tensor("a")), 1.0f);
  EXPECT_EQ(scalar(set.tensor("c")), 3.0f);
  EXPECT_EQ(set.at("c").file->path().filename(), "s2.safetensors");
  expect_error([&] { set.at("zzz"); }, {"'zzz'", "missing"});
}

TEST(SafetensorsSet, IndexErrors) {
  TempDir dir;
  const fs::path index = dir / "model.safetensors.index.json";
  write_shard(dir / "s1.safetensors", {{"a", 1.0f}, {"b", 2.0f}});
  write_shard(dir / "s2.safetensors", {{"b", 5.0f}});

  write_index(index, {{"a", "s1.safetensors"}, {"b", "s1.safetensors"}, {"c", "missing.safetensors"}});
  expect_error([&] { SafetensorsSet::open_index(index); }, {index.string(), "missing.safetensors", "missing"});

  write_index(index, {{"a", "s1.safetensors"}, {"b", "s1.safetensors"}, {"x", "s1.safetensors"}});
  expect_error([&] { SafetensorsSet::open_index(index); }, {"'x'", "s1.safetensors", "does not contain"});

  write_index(index, {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}});
  expect_error([&] { SafetensorsSet::open_index(index); }, {"'b'", "s1.safetensors", "s2.safetensors"});

  write_index(index, {{"a", "s1.safetensors"}});
  expect_error([&] { SafetensorsSet::open_index(index); }, {"'b'", "does not list"});

  write_index(index, {{"a", "../s1.safetensors"}});
  expect_error([&] { SafetensorsSet::open_index(index); }, {"not a plain file name"});

  write_file(index, "{\"weight_map\": 3}");
  expect_error([&] { SafetensorsSet::open_index(index); }, {index.string(), "weight_map"});
  write_file(index, "not json");
  expect_error([&] { SafetensorsSet::open_index(index); }, {index.string(), "not valid JSON"});

  write_shard(dir / "model.safetensors", {{"a", 1.0f}});
  expect_error([&] { SafetensorsSet::open_dir(dir.path()); }, {"both model.safetensors and"});
}

}  // namespace
}  // namespace nvfp4lm::test::test_safetensors
