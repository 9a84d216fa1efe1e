// The teacher top-K cache (distill_cache.h): sample keys, the reader that attaches a batch's entries and the writer
// that runs the teacher.
#include "train/distill_cache.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <unordered_set>
#include <vector>

#include "core/error.h"
#include "core/logging.h"
#include "core/memory.h"
#include "core/number_text.h"
#include "core/publish.h"
#include "io/checksum.h"
#include "io/safetensors_reader.h"
#include "io/safetensors_writer.h"
#include "model/qwen3_block.h"
#include "ops/cross_entropy.h"
#include "ops/distillation.h"
#include "ops/embedding.h"
#include "ops/gemm.h"

namespace nvfp4lm {
namespace {

Tensor host_int32(const Tensor& t) { return t.contiguous().to(Device::cpu()); }

std::string metadata_at(const std::map<std::string, std::string>& metadata, const std::string& key,
                        const fs::path& path) {
  const auto it = metadata.find(key);
  NVFP4LM_CHECK(it != metadata.end(),
                "{}: a teacher top-K cache without the metadata \"{}\"; make it again with "
                "`nvfp4lm distill-cache`",
                path.string(), key);
  return it->second;
}

int64_t metadata_int(const std::map<std::string, std::string>& metadata, const std::string& key, const fs::path& path,
                     int64_t low) {
  const std::string text = metadata_at(metadata, key, path);
  std::string problem;
  const std::optional<int64_t> value = parse_number<int64_t>(text, NumberRange<int64_t>{low}, problem);
  NVFP4LM_CHECK(value.has_value(), "{}: metadata \"{}\" \"{}\" {}", path.string(), key, text, problem);
  return *value;
}

// A fresh temporary sibling of the cache (core/publish.h: a name of its own, made with O_EXCL, so two runs on one
// --output never share it and no user file is touched) that the writer buffers log_probs in (they follow all the
// ids in the cache); removed when done, or by the next writer of the cache when this process is killed.
class SpillFile {
 public:
  explicit SpillFile(const fs::path& output) {
    const int fd = create_temporary_file(output, path_, /*read_back=*/true);
    file_ = ::fdopen(fd, "w+b");
    if (file_ == nullptr) {
      const int error = errno;
      ::close(fd);
      ::unlink(path_.c_str());
      NVFP4LM_FAIL("{}: cannot open the temporary file beside the cache: {}", path_.string(), std::strerror(error));
    }
  }
  ~SpillFile() {
    std::fclose(file_);
    ::unlink(path_.c_str());
  }
  SpillFile(const SpillFile&) = delete;
  SpillFile& operator=(const SpillFile&) = delete;

  void write(const void* data, size_t bytes) {
    NVFP4LM_CHECK(std::fwrite(data, 1, bytes, file_) == bytes, "{}: write failed (disk full?)", path_.string());
  }
  // Streams everything written back to `sink` in pieces.
  template <typename Sink>
  void replay(Sink&& sink) {
    NVFP4LM_CHECK(std::fflush(file_) == 0 && std::fseek(file_, 0, SEEK_SET) == 0, "{}: cannot read back",
                  path_.string());
    std::vector<char> buffer(size_t{1} << 22);
    size_t got = 0;
    while ((got = std::fread(buffer.data(), 1, buffer.size(), file_)) > 0) sink(buffer.data(), got);
    NVFP4LM_CHECK(std::ferror(file_) == 0, "{}: read failed", path_.string());
  }

 private:
  fs::path path_;
  std::FILE* file_ = nullptr;
};

// Every position of a cache is a distribution: K log-probabilities and the log of the rest, none NaN or above 0
// (-inf is a probability of 0), whose probabilities sum to 1 within kSumTolerance (F32 log-probabilities of a
// softmax sum to 1 within ~1e-6 a term). A damaged or hand-made cache (NaN, +inf, K tokens of probability 1) would
// otherwise be trained on: every step skipped, or losses in the thousands. Checked once, when the cache is opened.
void check_distributions(const Tensor& log_probs, const Tensor& log_rest, const fs::path& path) {
  constexpr double kSumTolerance = 1e-3;
  const int64_t positions = log_probs.dim(0), k = log_probs.dim(1);
  const float* lp = log_probs.data<float>();
  const float* rest = log_rest.data<float>();
  auto bad_value = [](float v) { return std::isnan(v) || v > 1e-6f; };
  for (int64_t p = 0; p < positions; ++p) {
    double sum = std::exp(static_cast<double>(rest[p]));
    NVFP4LM_CHECK(!bad_value(rest[p]),
                  "{}: position {} has log_rest {}: a log-probability is a number at most 0 (-inf for none); the "
                  "cache is damaged: make it again with `nvfp4lm distill-cache`",
                  path.string(), p, rest[p]);
    for (int64_t j = 0; j < k; ++j) {
      const float v = lp[p * k + j];
      NVFP4LM_CHECK(!bad_value(v),
                    "{}: position {} has log_probs[{}] = {}: a log-probability is a number at most 0 (-inf for "
                    "none); the cache is damaged: make it again with `nvfp4lm distill-cache`",
                    path.string(), p, j, v);
      sum += std::exp(static_cast<double>(v));
    }
    NVFP4LM_CHECK(std::abs(sum - 1.0) <= kSumTolerance,
                  "{}: the probabilities of position {} (its {} tokens and the rest) sum to {:.6g}, not 1; the cache "
                  "is damaged: make it again with `nvfp4lm distill-cache`",
                  path.string(), p, k, sum);
  }
}

}  // namespace

std::vector<BatchSample> trained_samples(const TrainBatch& batch) {
  const Tensor ids = host_int32(batch.ids), targets = host_int32(batch.targets);
  Tensor segments;
  if (batch.segment_ids.defined()) segments = host_int32(batch.segment_ids);
  const int64_t rows = ids.dim(0), width = ids.dim(1);
  const int32_t* id = ids.data<int32_t>();
  const int32_t* target = targets.data<int32_t>();
  const int32_t* segment = segments.defined() ? segments.data<int32_t>() : nullptr;
  std::vector<BatchSample> samples;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t begin = 0;
    while (begin < width) {
      int64_t end = begin + 1;
      if (segment != nullptr)
        while (end < width && segment[r * width + end] == segment[r * width + begin]) ++end;
      else
        end = width;  // no segments: the row is one sample
      BatchSample sample{r, begin, end, 0, 0};
      for (int64_t t = begin; t < end; ++t) sample.trained += target[r * width + t] != kIgnoreIndex ? 1 : 0;
      if (sample.trained > 0) {
        const auto bytes = static_cast<size_t>(end - begin) * sizeof(int32_t);
        Xxh64 hash;
        hash.update(id + r * width + begin, bytes);
        hash.update(target + r * width + begin, bytes);
        sample.key = hash.digest();
        samples.push_back(sample);
      }
      begin = end;
    }
  }
  return samples;
}

bool is_distill_cache(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return false;
  // Only the header: a cache says what it is in its metadata, within the first few hundred bytes of the header.
  uint64_t header_bytes = 0;
  std::string header;
  if (std::fread(&header_bytes, sizeof(header_bytes), 1, file) == 1 && header_bytes <= kSafetensorsMaxHeaderBytes) {
    header.resize(std::min<uint64_t>(header_bytes, 4096));
    header.resize(std::fread(header.data(), 1, header.size(), file));
  }
  std::fclose(file);
  return header.find(std::string("\"format\":\"") + kDistillCacheFormat + "\"") != std::string::npos;
}

DistillCache DistillCache::open(const fs::path& path) {
  DistillCache cache;
  cache.file_ = SafetensorsFile::open(path);
  const auto& metadata = cache.file_->metadata();
  NVFP4LM_CHECK(metadata_at(metadata, "format", path) == kDistillCacheFormat,
                "{}: not a teacher top-K cache (metadata format \"{}\")", path.string(),
                metadata_at(metadata, "format", path));
  NVFP4LM_CHECK(metadata_at(metadata, "version", path) == "1",
                "{}: a teacher top-K cache of version {}; this nvfp4lm reads version 1: make it again", path.string(),
                metadata_at(metadata, "version", path));
  DistillCacheInfo& info = cache.info_;
  info.path = path;
  info.teacher = metadata_at(metadata, "teacher", path);
  info.data = metadata_at(metadata, "data", path);
  info.vocab = metadata_int(metadata, "vocab", path, 2);
  info.top_k = metadata_int(metadata, "top_k", path, 1);
  info.samples = metadata_int(metadata, "samples", path, 0);
  info.positions = metadata_int(metadata, "positions", path, 0);
  std::string problem;
  const std::optional<double> temperature =
      parse_number<double>(metadata_at(metadata, "temperature", path), NumberRange<double>{}, problem);
  NVFP4LM_CHECK(temperature && *temperature > 0, "{}: metadata \"temperature\" must be a positive number",
                path.string());
  info.temperature = *temperature;
  NVFP4LM_CHECK(info.top_k <= kMaxTeacherTopK && info.top_k <= info.vocab,
                "{}: top_k {} must be at most {} and the vocabulary {}", path.string(), info.top_k, kMaxTeacherTopK,
                info.vocab);

  const int64_t p = info.positions, k = info.top_k, s = info.samples;
  auto entry = [&](const char* name, DType dtype, Shape shape) {
    const SafetensorsEntry& e = cache.file_->at(name);
    NVFP4LM_CHECK(e.dtype == dtype && e.shape == shape, "{}: \"{}\" is {} {}, expected {} {}", path.string(), name,
                  dtype_name(e.dtype), e.shape.str(), dtype_name(dtype), shape.str());
    return cache.file_->tensor(e);
  };
  cache.ids_ = entry("ids", DType::I32, Shape{p, k});
  cache.log_probs_ = entry("log_probs", DType::F32, Shape{p, k});
  cache.log_rest_ = entry("log_rest", DType::F32, Shape{p});
  cache.targets_ = entry("targets", DType::I32, Shape{p});
  const Tensor keys = entry("sample_keys", DType::I64, Shape{s});
  cache.offsets_ = entry("sample_offsets", DType::I64, Shape{s + 1});
  const auto* offsets = cache.offsets_.data<int64_t>();
  const auto* key = keys.data<int64_t>();
  NVFP4LM_CHECK(offsets[0] == 0 && offsets[s] == p, "{}: sample_offsets must run from 0 to positions ({})",
                path.string(), p);
  cache.sample_of_key_.reserve(static_cast<size_t>(s));
  for (int64_t i = 0; i < s; ++i) {
    NVFP4LM_CHECK(offsets[i + 1] > offsets[i], "{}: sample {} has no positions (sample_offsets must increase)",
                  path.string(), i);
    NVFP4LM_CHECK(cache.sample_of_key_.emplace(static_cast<uint64_t>(key[i]), i).second,
                  "{}: sample key {} appears twice", path.string(), checksum_hex(static_cast<uint64_t>(key[i])));
  }
  check_distributions(cache.log_probs_, cache.log_rest_, path);
  return cache;
}

int64_t DistillCache::first_position(const BatchSample& sample) const {
  const auto found = sample_of_key_.find(sample.key);
  NVFP4LM_CHECK(found != sample_of_key_.end(),
                "{}: a sample of the data (row {}, tokens {}..{} of its batch) is not in this teacher cache, made "
                "from {}: make the cache with `nvfp4lm distill-cache` and the same --model, data and data flags "
                "(--data, --eval-data, --eval-split, --seq-len, --data-format, --chat-template, ...) as this run",
                info_.path.string(), sample.row, sample.begin, sample.end, info_.data);
  const int64_t* offsets = offsets_.data<int64_t>();
  const int64_t first = offsets[found->second], count = offsets[found->second + 1] - first;
  NVFP4LM_CHECK(count == sample.trained, "{}: sample {} has {} positions in the cache, {} in the data",
                info_.path.string(), found->second, count, sample.trained);
  return first;
}

void DistillCache::check_covers(const TrainBatch& batch) const {
  for (const BatchSample& sample : trained_samples(batch)) (void)first_position(sample);
}

void DistillCache::attach(TrainBatch& batch) const {
  const std::vector<BatchSample> samples = trained_samples(batch);
  const Tensor targets = host_int32(batch.targets);
  const int64_t width = targets.dim(1), k = info_.top_k;
  const int32_t* target = targets.data<int32_t>();
  int64_t rows = 0;
  for (const BatchSample& sample : samples) rows += sample.trained;
  TeacherTopK top{Tensor::empty({rows, k}, DType::I32), Tensor::empty({rows, k}, DType::F32),
                  Tensor::empty({rows}, DType::F32)};
  const int32_t* ids = ids_.data<int32_t>();
  const float* log_probs = log_probs_.data<float>();
  const float* log_rest = log_rest_.data<float>();
  const int32_t* cached_targets = targets_.data<int32_t>();
  int64_t out = 0;
  std::vector<int32_t> sorted(static_cast<size_t>(k));
  for (const BatchSample& sample : samples) {
    int64_t position = first_position(sample);
    for (int64_t t = sample.begin; t < sample.end; ++t) {
      const int32_t want = target[sample.row * width + t];
      if (want == kIgnoreIndex) continue;
      NVFP4LM_CHECK(cached_targets[position] == want, "{}: position {} has target {} in the cache, {} in the data",
                    info_.path.string(), position, cached_targets[position], want);
      // The kernels index the vocabulary with these ids and need them distinct: a damaged file stops here.
      std::copy(ids + position * k, ids + (position + 1) * k, sorted.begin());
      std::sort(sorted.begin(), sorted.end());
      NVFP4LM_CHECK(sorted.front() >= 0 && sorted.back() < info_.vocab &&
                        std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(),
                    "{}: position {} has token ids outside [0, {}) or repeated", info_.path.string(), position,
                    info_.vocab);
      std::copy(ids + position * k, ids + (position + 1) * k, top.ids.data<int32_t>() + out * k);
      std::copy(log_probs + position * k, log_probs + (position + 1) * k, top.log_probs.data<float>() + out * k);
      top.log_rest.data<float>()[out] = log_rest[position];
      ++position;
      ++out;
    }
  }
  batch.teacher_top_k = std::move(top);
}

DistillCacheStats write_distill_cache(Qwen3Trainable& teacher, std::span<const TrainBatch> batches,
                                      const DistillCacheWriteOptions& options,
                                      const std::function<void(const DistillCacheProgress&)>& progress) {
  const Tensor& lm_head = teacher.lm_head_weights();
  const int64_t vocab = lm_head.dim(0), k = options.top_k;
  NVFP4LM_CHECK(k >= 1 && k <= std::min<int64_t>(kMaxTeacherTopK, vocab),
                "--top-k must be in [1, {}] (and at most the vocabulary, {}), got {}", kMaxTeacherTopK, vocab, k);

  // Pass 1 (host): the distinct samples in order of first appearance and their positions.
  std::vector<std::vector<BatchSample>> batch_samples;
  std::vector<int64_t> keys, offsets{0};
  std::unordered_set<uint64_t> seen;
  DistillCacheStats stats;
  for (const TrainBatch& batch : batches) {
    batch_samples.push_back(trained_samples(batch));
    for (const BatchSample& sample : batch_samples.back()) {
      if (!seen.insert(sample.key).second) {
        ++stats.duplicates;
        continue;
      }
      keys.push_back(static_cast<int64_t>(sample.key));
      offsets.push_back(offsets.back() + sample.trained);
    }
  }
  const auto samples = static_cast<int64_t>(keys.size());
  const int64_t positions = offsets.back();
  NVFP4LM_CHECK(positions > 0, "no trained tokens in the data: nothing to distill");
  stats.samples = samples;
  stats.positions = positions;

  const std::map<std::string, std::string> metadata = {{"format", kDistillCacheFormat},
                                                       {"version", "1"},
                                                       {"teacher", options.teacher},
                                                       {"data", options.data},
                                                       {"vocab", std::to_string(vocab)},
                                                       {"top_k", std::to_string(k)},
                                                       {"temperature", fmt::format("{}", options.temperature)},
                                                       {"samples", std::to_string(samples)},
                                                       {"positions", std::to_string(positions)}};
  SafetensorsWriter writer(options.output,
                           {{"ids", DType::I32, Shape{positions, k}},
                            {"log_probs", DType::F32, Shape{positions, k}},
                            {"log_rest", DType::F32, Shape{positions}},
                            {"targets", DType::I32, Shape{positions}},
                            {"sample_keys", DType::I64, Shape{samples}},
                            {"sample_offsets", DType::I64, Shape{samples + 1}}},
                           metadata, options.overwrite);
  SpillFile spill(options.output);
  std::vector<float> log_rest;
  std::vector<int32_t> targets;
  log_rest.reserve(static_cast<size_t>(positions));
  targets.reserve(static_cast<size_t>(positions));
  double rest_sum = 0;

  // Pass 2: the teacher on every batch with a new sample; its logits in row chunks within ~256 MiB of F32.
  const Device device = teacher.device();
  const int64_t chunk_rows = std::max<int64_t>(1, (int64_t{256} << 20) / (vocab * 4));
  std::unordered_set<uint64_t> written;
  DistillCacheProgress report{0, static_cast<int64_t>(batches.size()), 0, positions};
  for (size_t b = 0; b < batches.size(); ++b) {
    const TrainBatch& batch = batches[b];
    const Tensor host_targets = host_int32(batch.targets);
    const int64_t width = host_targets.dim(1);
    std::vector<int32_t> rows;  // flattened token rows of the new samples' trained targets, in order
    for (const BatchSample& sample : batch_samples[b]) {
      if (!written.insert(sample.key).second) continue;
      for (int64_t t = sample.begin; t < sample.end; ++t) {
        const int32_t target = host_targets.data<int32_t>()[sample.row * width + t];
        if (target == kIgnoreIndex) continue;
        rows.push_back(static_cast<int32_t>(sample.row * width + t));
        targets.push_back(target);
      }
    }
    if (!rows.empty()) {
      const MemoryPhase phase("teacher forward");
      const Tensor hidden = detail::token_rows(teacher.final_hidden(batch));
      for (size_t first = 0; first < rows.size(); first += static_cast<size_t>(chunk_rows)) {
        const auto count = static_cast<int64_t>(std::min(rows.size() - first, static_cast<size_t>(chunk_rows)));
        const std::vector<int32_t> index(rows.begin() + static_cast<std::ptrdiff_t>(first),
                                         rows.begin() + static_cast<std::ptrdiff_t>(first) + count);
        Tensor picked = Tensor::empty({count, hidden.dim(1)}, hidden.dtype(), device);
        embedding_forward(Tensor::from_ints(index, {count}).to(device), hidden, picked);
        Tensor logits = Tensor::empty({count, vocab}, DType::F32, device);
        gemm(picked, false, lm_head, true, logits);
        const TeacherTopK top = select_teacher_top_k(logits.to(Device::cpu()), k, options.temperature);
        writer.write_bytes("ids", top.ids.raw(), static_cast<uint64_t>(count * k) * sizeof(int32_t));
        spill.write(top.log_probs.raw(), static_cast<size_t>(count * k) * sizeof(float));
        const float* rest = top.log_rest.data<float>();
        for (int64_t i = 0; i < count; ++i) {
          log_rest.push_back(rest[i]);
          rest_sum += std::exp(static_cast<double>(rest[i]));
        }
      }
    }
    report.batches_done = static_cast<int64_t>(b) + 1;
    report.positions_done = static_cast<int64_t>(log_rest.size());
    if (progress) progress(report);
  }
  NVFP4LM_ASSERT(
      static_cast<int64_t>(log_rest.size()) == positions && static_cast<int64_t>(targets.size()) == positions,
      "distill cache: {} positions written of {}", log_rest.size(), positions);
  spill.replay([&](const char* data, size_t bytes) { writer.write_bytes("log_probs", data, bytes); });
  writer.write_bytes("log_rest", log_rest.data(), log_rest.size() * sizeof(float));
  writer.write_bytes("targets", targets.data(), targets.size() * sizeof(int32_t));
  writer.write_bytes("sample_keys", keys.data(), keys.size() * sizeof(int64_t));
  writer.write_bytes("sample_offsets", offsets.data(), offsets.size() * sizeof(int64_t));
  writer.finish();
  stats.mean_rest = rest_sum / static_cast<double>(positions);
  std::error_code ec;
  stats.bytes = fs::file_size(options.output, ec);
  return stats;
}

}  // namespace nvfp4lm
