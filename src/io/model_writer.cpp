#include "io/model_writer.h"

#include <algorithm>
#include <set>

#include "core/error.h"
#include "core/logging.h"
#include "io/compressed_tensors.h"
#include "io/dat_format.h"
#include "io/gguf_model_writer.h"
#include "io/model_formats.h"
#include "io/modelopt.h"
#include "io/safetensors_writer.h"

namespace nvfp4lm {
namespace {

using json = nlohmann::json;

std::string dat_prefix(const std::string& name) {
  constexpr std::string_view suffix = ".weight";
  if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
    return name.substr(0, name.size() - suffix.size());
  return name;
}

uint64_t dense_bytes(const WeightPlan& weight) {
  return static_cast<uint64_t>(weight.shape.numel()) * dtype_bytes(weight.dtype);
}

// with_input_scale: a W4A4 export (measured activation scales), io/modelopt.h and io/compressed_tensors.h.
// The two NVFP4 safetensors layouts hold the same bytes under other names (codes, block scales, one F32 tensor scale
// and with calibration one F32 input scale), so ModelOpt's count serves compressed-tensors too.
uint64_t planned_bytes(const WeightPlan& weight, bool with_input_scale) {
  return weight.nvfp4 ? modelopt_weight_bytes(weight.shape[0], weight.shape[1], with_input_scale) : dense_bytes(weight);
}

void add_entries(ModelFormat format, std::vector<SafetensorsEntrySpec>& entries, const WeightPlan& weight,
                 bool with_input_scale) {
  if (!weight.nvfp4)
    entries.push_back({weight.name, weight.dtype, weight.shape});
  else if (format == ModelFormat::CompressedTensorsNvfp4)
    declare_compressed_tensors_weight(entries, weight.name, weight.shape[0], weight.shape[1], with_input_scale);
  else
    declare_modelopt_weight(entries, weight.name, weight.shape[0], weight.shape[1], with_input_scale);
}

// The tokenizer a GGUF export embeds: tokenizer.json (and tokenizer_config.json) among the files to copy.
Tokenizer gguf_tokenizer(const std::vector<fs::path>& files, const fs::path& out) {
  TokenizerFiles found;
  for (const fs::path& file : files) {
    if (file.filename() == "tokenizer.json") found.tokenizer_json = file;
    if (file.filename() == "tokenizer_config.json") found.tokenizer_config_json = file;
  }
  NVFP4LM_CHECK(!found.tokenizer_json.empty(),
                "{}: a GGUF file carries the tokenizer, but the model has no tokenizer.json beside it; name one with "
                "--tokenizer DIR",
                out.string());
  return Tokenizer::load(found);
}

}  // namespace

struct ModelWriter::Impl {
  std::unique_ptr<SafetensorsWriter> shard;
  size_t shard_index = 0;
  std::unique_ptr<DatWriter> dat;
  std::unique_ptr<GgufModelWriter> gguf;
};

ModelWriter::ModelWriter(ModelFormat format, const fs::path& out_dir, std::vector<WeightPlan> plan,
                         ModelWriterOptions options)
    : format_(format),
      out_dir_(out_dir),
      plan_(std::move(plan)),
      options_(std::move(options)),
      impl_(std::make_unique<Impl>()) {
  check_replaceable(out_dir_, "the output", model_output_kind(format_), options_.overwrite);
  std::set<std::string> names;
  for (const auto& weight : plan_) {
    NVFP4LM_CHECK(names.insert(weight.name).second, "{}: weight '{}' planned twice", out_dir_.string(), weight.name);
    NVFP4LM_CHECK(!weight.nvfp4 || format_ != ModelFormat::HfSafetensors,
                  "{}: weight '{}' is NVFP4 but the hf-safetensors format stores dense weights only (use modelopt or "
                  "dat)",
                  out_dir_.string(), weight.name);
    NVFP4LM_CHECK(!weight.nvfp4 || (weight.shape.rank() == 2 && weight.shape[1] % 16 == 0),
                  "{}: weight '{}' of shape {} cannot be NVFP4 (needs [out, in] with in a multiple of 16)",
                  out_dir_.string(), weight.name, weight.shape.str());
  }

  if (format_ == ModelFormat::Gguf) {  // one file, with its own temporary
    const Qwen3Config config = parse_qwen3_config(options_.config_json, out_dir_.string() + " (config)");
    impl_->gguf = std::make_unique<GgufModelWriter>(
        out_dir_, plan_, config, gguf_tokenizer(options_.copy_files, out_dir_), options_.gguf_type, options_.overwrite);
    return;
  }
  // Removes what killed writers of this directory left (100+ MB each), then makes the temporary directory.
  staging_ = std::make_unique<StagedDirectory>(out_dir_);
  setup_writers();  // if it fails, impl_ (declared after staging_) closes its files before the directory goes
}

const fs::path& ModelWriter::staging_dir() const { return staging_->path(); }

void ModelWriter::setup_writers() {
  if (format_ == ModelFormat::Dat) {
    uint64_t entries = 0;
    for (const auto& weight : plan_) entries += weight.nvfp4 ? 2 : 1;
    impl_->dat = std::make_unique<DatWriter>(staging_dir() / kDatFileName, entries);
    return;
  }
  // Shards: weights in plan order, a new shard when the next weight would overflow a non-empty one.
  uint64_t shard_bytes = 0;
  size_t shards = plan_.empty() ? 1 : 0;
  for (const auto& weight : plan_) {
    const uint64_t bytes = planned_bytes(weight, options_.calibration.has_value());
    if (shards == 0 || (shard_bytes > 0 && shard_bytes + bytes > options_.max_shard_bytes)) {
      ++shards;
      shard_bytes = 0;
    }
    shard_bytes += bytes;
    shard_of_.push_back(shards - 1);
  }
  for (size_t i = 0; i < shards; ++i)
    shard_files_.push_back(shards == 1 ? std::string("model.safetensors")
                                       : fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards));
  open_shard(0);
}

ModelWriter::~ModelWriter() {
  impl_.reset();  // closes (and removes) unfinished files before staging_ removes the directory
}

void ModelWriter::open_shard(size_t shard) {
  if (impl_->shard) impl_->shard->finish();
  std::vector<SafetensorsEntrySpec> entries;
  for (size_t i = 0; i < plan_.size(); ++i)
    if (shard_of_[i] == shard) add_entries(format_, entries, plan_[i], options_.calibration.has_value());
  impl_->shard = std::make_unique<SafetensorsWriter>(staging_dir() / shard_files_[shard], std::move(entries));
  impl_->shard_index = shard;
}

const WeightPlan& ModelWriter::expect_next(const std::string& name, bool nvfp4) {
  if (format_ == ModelFormat::Gguf) {  // GGUF takes whole tensors in its own order checks
    NVFP4LM_CHECK(!finished_ && next_ < plan_.size() && plan_[next_].name == name,
                  "{}: weight '{}' written out of order", out_dir_.string(), name);
    return plan_[next_];
  }
  NVFP4LM_CHECK(!finished_, "{}: weight '{}' written after finish()", out_dir_.string(), name);
  NVFP4LM_CHECK(next_ < plan_.size() && plan_[next_].name == name,
                "{}: weight '{}' written out of order; the next one planned is '{}'", out_dir_.string(), name,
                next_ < plan_.size() ? plan_[next_].name : std::string("(none)"));
  const WeightPlan& weight = plan_[next_];
  NVFP4LM_CHECK(weight.nvfp4 == nvfp4, "{}: weight '{}' was planned {} but is written {}", out_dir_.string(), name,
                weight.nvfp4 ? "NVFP4" : "dense", nvfp4 ? "NVFP4" : "dense");
  if (format_ != ModelFormat::Dat && shard_of_[next_] != impl_->shard_index) open_shard(shard_of_[next_]);
  return weight;
}

void ModelWriter::write_dense_bytes(const std::string& name, const void* data, uint64_t bytes) {
  NVFP4LM_CHECK(format_ != ModelFormat::Gguf, "{}: GGUF weights are written whole (write_dense)", out_dir_.string());
  const WeightPlan& weight = expect_next(name, false);
  NVFP4LM_CHECK(bytes <= dense_bytes(weight) - next_written_, "{}: weight '{}' gets {} bytes but only {} remain",
                out_dir_.string(), name, bytes, dense_bytes(weight) - next_written_);
  if (format_ == ModelFormat::Dat) {
    if (next_written_ == 0) impl_->dat->begin_entry(name, dat_type_of(weight.dtype), weight.shape.to_vector());
    impl_->dat->write_bytes(data, bytes);
  } else {
    impl_->shard->write_bytes(name, data, bytes);
  }
  next_written_ += bytes;
  bytes_written_ += bytes;
  advance_if_complete();
}

void ModelWriter::advance_if_complete() {
  if (next_written_ != dense_bytes(plan_[next_])) return;
  next_written_ = 0;
  ++next_;
}

void ModelWriter::write_dense(const std::string& name, const Tensor& tensor) {
  const WeightPlan& weight = expect_next(name, false);
  if (format_ == ModelFormat::Gguf) {
    impl_->gguf->write_dense(name, tensor);
    bytes_written_ = impl_->gguf->bytes_written();
    ++next_;
    return;
  }
  NVFP4LM_CHECK(next_written_ == 0, "{}: weight '{}' written whole after pieces of it", out_dir_.string(), name);
  NVFP4LM_CHECK(tensor.defined() && tensor.device().is_cpu() && tensor.shape() == weight.shape,
                "{}: weight '{}' is {}, planned {} {}", out_dir_.string(), name,
                tensor.defined() ? tensor.str() : "undefined", dtype_name(weight.dtype), weight.shape.str());
  Tensor data = tensor;
  if (tensor.dtype() != weight.dtype) {
    NVFP4LM_CHECK(dtype_is_float(tensor.dtype()) && dtype_is_float(weight.dtype),
                  "{}: weight '{}' is {} and cannot be stored as {}", out_dir_.string(), name, tensor.str(),
                  dtype_name(weight.dtype));
    data = Tensor::empty(weight.shape, weight.dtype);
    convert_cpu(tensor, data);
  }
  data = data.contiguous();
  if (data.nbytes() == 0) {
    if (format_ == ModelFormat::Dat) impl_->dat->begin_entry(name, dat_type_of(weight.dtype), weight.shape.to_vector());
    ++next_;
    return;
  }
  write_dense_bytes(name, data.raw(), data.nbytes());
}

void ModelWriter::write_nvfp4(const std::string& name, const Nvfp4Tensor& q) {
  const WeightPlan& weight = expect_next(name, true);
  validate_nvfp4(q, name);
  NVFP4LM_CHECK(q.rows == weight.shape[0] && q.cols == weight.shape[1], "{}: NVFP4 weight '{}' is [{}, {}], planned {}",
                out_dir_.string(), name, q.rows, q.cols, weight.shape.str());
  NVFP4LM_CHECK(q.device().is_cpu(), "{}: NVFP4 weight '{}' must be on the CPU to be written", out_dir_.string(), name);
  if (format_ == ModelFormat::Gguf) {
    impl_->gguf->write_nvfp4(name, q);
    bytes_written_ = impl_->gguf->bytes_written();
    ++next_;
    return;
  }
  NVFP4LM_CHECK(holds_tensor_scale(format_capabilities(format_, options_.gguf_type), q.tensor_scale),
                "{}: weight '{}' has tensor scale {}, but the {} format stores none (it reads back as 1); quantize "
                "it with tensor scale 1",
                out_dir_.string(), name, q.tensor_scale, model_format_name(format_));
  if (format_ == ModelFormat::Dat) {
    const std::string prefix = dat_prefix(name);
    impl_->dat->write(prefix + ".qdata", q.codes.view_as(DType::E2M1x2));
    impl_->dat->write(prefix + ".scale", q.block_scales);
  } else {
    const std::optional<float> input_scale =
        options_.calibration ? std::optional(options_.calibration->input_scale(name)) : std::nullopt;
    if (format_ == ModelFormat::CompressedTensorsNvfp4) {
      if (!write_compressed_tensors_weight(*impl_->shard, name, q, input_scale)) ++inexact_global_scales_;
    } else {
      write_modelopt_weight(*impl_->shard, name, q, input_scale);
    }
  }
  bytes_written_ += q.codes.nbytes() + q.block_scales.nbytes();
  ++next_;
}

void ModelWriter::finish() {
  NVFP4LM_CHECK(!finished_, "{}: finish() called twice", out_dir_.string());
  NVFP4LM_CHECK(next_ == plan_.size(), "{}: weight '{}' was planned but not written", out_dir_.string(),
                next_ < plan_.size() ? plan_[next_].name : std::string());
  if (format_ == ModelFormat::Gguf) {
    impl_->gguf->finish();
    bytes_written_ = impl_->gguf->bytes_written();
    finished_ = true;
    return;
  }
  json config = options_.config_json.is_object() ? options_.config_json : json::object();
  config.erase("quantization_config");
  if (format_ == ModelFormat::Dat) {
    impl_->dat->finish();
  } else {
    // Shards that hold no weight at all (possible only with an empty plan) still get written.
    while (impl_->shard_index + 1 < shard_files_.size()) open_shard(impl_->shard_index + 1);
    impl_->shard->finish();
    if (shard_files_.size() > 1) {
      json weight_map = json::object();
      uint64_t total = 0;
      for (size_t i = 0; i < plan_.size(); ++i) {
        std::vector<SafetensorsEntrySpec> entries;
        add_entries(format_, entries, plan_[i], options_.calibration.has_value());
        for (const auto& entry : entries) {
          weight_map[entry.name] = shard_files_[shard_of_[i]];
          total += SafetensorsWriter::entry_bytes(entry);
        }
      }
      write_file_atomic(staging_dir() / "model.safetensors.index.json",
                        json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2) + "\n",
                        /*overwrite=*/false);
    }
  }
  // Both NVFP4 safetensors formats list the modules left dense: lm_head, unless it is NVFP4.
  const bool lm_head_nvfp4 = std::any_of(plan_.begin(), plan_.end(), [](const WeightPlan& weight) {
    return weight.name == kLmHeadWeightName && weight.nvfp4;
  });
  const std::vector<std::string> exclude =
      lm_head_nvfp4 ? std::vector<std::string>{} : std::vector<std::string>{"lm_head"};
  if (format_ == ModelFormat::ModeloptNvfp4) {
    const ActivationCalibration* calibration = options_.calibration ? &*options_.calibration : nullptr;
    const std::string_view algo = modelopt_quant_algo(calibration != nullptr);
    config["quantization_config"] = modelopt_quantization_config(exclude, algo);
    json note = modelopt_calibration_note(calibration != nullptr, calibration ? calibration->source : "",
                                          calibration ? calibration->tokens : 0);
    // Where people and engines read the checkpoint, not only in this run's log (issue 49): exclude_modules and
    // the quantization_config's ignore list lack lm_head, and the note says what that costs.
    if (lm_head_nvfp4) note["lm_head"] = quantized_lm_head_note();
    write_file_atomic(staging_dir() / "hf_quant_config.json", hf_quant_config_json(exclude, algo, note).dump(4) + "\n",
                      /*overwrite=*/false);
    if (calibration == nullptr) log::info("{}", weight_only_export_notice(out_dir_.string()));
    if (lm_head_nvfp4) log::warn("{}", quantized_lm_head_warning(out_dir_.string()));
  }
  if (format_ == ModelFormat::CompressedTensorsNvfp4) {
    const auto nvfp4_weights =
        std::count_if(plan_.begin(), plan_.end(), [](const WeightPlan& weight) { return weight.nvfp4; });
    config["quantization_config"] = compressed_tensors_quantization_config(exclude, options_.calibration.has_value());
    if (!options_.calibration)
      log::info(
          "{}: weight-only NVFP4 (compressed-tensors NVFP4A16, no input_global_scale): activations were not "
          "calibrated; pass --calibrate FILE (train: --calibrate-steps N) for W4A4 (the NVFP4 scheme)",
          out_dir_.string());
    if (lm_head_nvfp4) log::warn("{}", quantized_lm_head_warning(out_dir_.string()));
    if (inexact_global_scales_ > 0)
      log::info(
          "{}: {} of {} NVFP4 weights have a tensor scale that is not 1/x of any float32; compressed-tensors "
          "stores 1/x, so they read back one float32 ulp away (ModelOpt's format stores the scale itself)",
          out_dir_.string(), inexact_global_scales_, nvfp4_weights);
  }
  write_file_atomic(staging_dir() / "config.json", config.dump(2) + "\n", /*overwrite=*/false);
  if (options_.generation_config)
    write_file_atomic(staging_dir() / "generation_config.json", options_.generation_config->dump(2) + "\n",
                      /*overwrite=*/false);
  for (const auto& file : options_.copy_files) {
    std::error_code ec;
    fs::copy_file(file, staging_dir() / file.filename(), fs::copy_options::overwrite_existing, ec);
    NVFP4LM_CHECK(!ec, "cannot copy {} into {}: {}", file.string(), out_dir_.string(), ec.message());
    fsync_path(staging_dir() / file.filename());
  }
  fsync_path(staging_dir());
  staging_->publish(options_.overwrite, "the output");
  finished_ = true;
}

}  // namespace nvfp4lm
