// Qwen3Trainable: building the master weights from model files, the parameter lists, refreshing the forward
// weights (QAT), and small helpers. The forward / backward pass is in qwen3_train_step.cpp.
#include "model/qwen3_trainable.h"

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <optional>

#include "core/logging.h"
#include "core/memory.h"
#include "io/weight_names.h"
#include "ops/cross_entropy.h"
#include "ops/elementwise.h"
#include "ops/nvfp4_w4a4_linear.h"
#include "quant/nvfp4_group_scale.h"

namespace nvfp4lm {
namespace {

using detail::TrainLayer;
using detail::TrainTensor;

// A weight's values (NVFP4 dequantized) as an owned F32 / BF16 tensor on `device` (also copied out of the read-only
// file mapping).
Tensor master_from(const ModelWeight& weight, DType dtype, Device device) {
  const Tensor source = weight.is_nvfp4() ? dequantize_nvfp4(weight.nvfp4, DType::F32) : weight.dense;
  Tensor master = Tensor::empty(source.shape(), dtype, Device::cpu());
  convert_cpu(source, master);
  return master.to(device);
}

// The master of `name`: the file's values as master_from gives them.
Tensor load_master(const ModelFiles& files, const std::string& name, DType dtype, Device device) {
  Tensor master = master_from(files.load(name), dtype, device);
  files.release(name);
  return master;
}

// A file's NVFP4 weight as an owned copy on `device` (LoRA's frozen base: used exactly as stored).
Nvfp4Tensor packed_copy(const Nvfp4Tensor& stored, Device device) {
  Nvfp4Tensor packed = stored;
  auto own = [&](const Tensor& t) { return device.is_cpu() ? t.clone() : t.to(device); };
  packed.codes = own(packed.codes);
  if (packed.block_scales.defined()) packed.block_scales = own(packed.block_scales);
  return packed;
}

// deq(Q(W)) of every member of one fused group (q/k/v, or gate/up, or a single linear) with the group's shared
// tensor scale (quant/nvfp4_group_scale.h: what quantize and the export write). A packed member keeps Q(W) (its
// `use` is filled later, by unpack_layer). A member's amax comes from `updated` when the optimizer step just
// measured it, else from a pass over its master. `also_packed` (native W4A4): the others keep Q(W) in `packed` too,
// `use` its values (dequantize_nvfp4 gives the fake quantization's bits).
void refresh_group(std::initializer_list<TrainTensor*> group, Nvfp4Block block, UpdatedMasterAmaxes* updated,
                   bool also_packed = false) {
  Nvfp4GroupScale scale;
  for (const TrainTensor* t : group) {
    NVFP4LM_ASSERT(fused_scale_group(t->name) == fused_scale_group((*group.begin())->name),
                   "{} is refreshed in the scale group of {}", t->name, (*group.begin())->name);
    const std::optional<float> measured = updated != nullptr ? updated->take(t->master, t->name) : std::nullopt;
    if (measured) {
      scale.add_amax(*measured);
    } else {
      scale.add(t->master, t->name);
    }
  }
  Nvfp4QuantOptions options;
  options.block = block;
  options.tensor_scale = scale.tensor_scale();
  for (TrainTensor* t : group) {
    if (t->keep_packed) {
      t->packed = quantize_nvfp4(t->master, options, t->name.c_str());
    } else if (also_packed) {
      t->packed = quantize_nvfp4(t->master, options, t->name.c_str());
      dequantize_nvfp4(t->packed, t->use);
    } else {
      fake_quantize_nvfp4(t->master, t->use, options, t->name.c_str());
    }
  }
}

void refresh_copy(TrainTensor& t) {
  if (!t.quantized && t.use.raw() != t.master.raw()) cast(t.master, t.use);
}

std::string block_name(Nvfp4Block block) { return block == Nvfp4Block::Row1x16 ? "1x16" : "16x16"; }

}  // namespace

std::string_view qat_mode_name(QatMode mode) {
  switch (mode) {
    case QatMode::Off:
      return "off";
    case QatMode::W4A16:
      return "w4a16";
    case QatMode::W4A4:
      return "w4a4";
  }
  return "?";
}

QatMode parse_qat_mode(std::string_view name) {
  for (QatMode mode : {QatMode::Off, QatMode::W4A16, QatMode::W4A4})
    if (name == qat_mode_name(mode)) return mode;
  NVFP4LM_FAIL("unknown QAT mode '{}' (choose off, w4a16 or w4a4)", name);
}

std::string_view recompute_name(Recompute mode) { return mode == Recompute::None ? "none" : "block"; }

Recompute parse_recompute(std::string_view name) {
  if (name == "none") return Recompute::None;
  if (name == "block") return Recompute::Block;
  NVFP4LM_FAIL("unknown --recompute '{}' (choose none, or block to re-run each block's forward in the backward)", name);
}

std::string_view loss_kind_name(LossKind kind) { return kind == LossKind::CrossEntropy ? "ce" : "l1"; }

LossKind parse_loss_kind(std::string_view name) {
  if (name == "ce") return LossKind::CrossEntropy;
  if (name == "l1" || name == "scalar") return LossKind::L1;  // "scalar": the F# predecessor's name
  NVFP4LM_FAIL("unknown loss '{}' (choose ce or l1)", name);
}

LossStats& LossStats::operator+=(const LossStats& other) {
  loss_sum += other.loss_sum;
  tokens += other.tokens;
  correct += other.correct;
  kl_sum += other.kl_sum;
  agree += other.agree;
  pairs += other.pairs;
  chosen_reward_sum += other.chosen_reward_sum;
  rejected_reward_sum += other.rejected_reward_sum;
  chosen_logp_sum += other.chosen_logp_sum;
  rejected_logp_sum += other.rejected_logp_sum;
  preferred += other.preferred;
  clipped += other.clipped;
  return *this;
}

int64_t count_loss_tokens(const TrainBatch& batch) {
  NVFP4LM_CHECK(batch.targets.defined() && batch.targets.dtype() == DType::I32,
                "batch targets must be an I32 tensor, got {}", batch.targets.defined() ? batch.targets.str() : "none");
  const Tensor host = batch.targets.contiguous().to(Device::cpu());
  const int32_t* t = host.data<int32_t>();
  return std::count_if(t, t + host.numel(), [](int32_t v) { return v != kIgnoreIndex; });
}

Qwen3Trainable Qwen3Trainable::from_files(const ModelFiles& files, const TrainModelOptions& options) {
  const MemoryPhase phase("load");
  const Qwen3Config& config = files.config();
  config.validate(files.config_path().string());
  const auto layers = static_cast<int>(config.num_hidden_layers);
  NVFP4LM_CHECK(options.train_last_layers >= -1 && options.train_last_layers <= layers,
                "train_last_layers is {}; the model has {} layers (use -1 to train everything, or 0..{})",
                options.train_last_layers, layers, layers);

  Qwen3Trainable model;
  model.config_ = config;
  model.options_ = options;
  model.first_trained_layer_ = options.train_last_layers < 0 ? 0 : layers - options.train_last_layers;
  // W4A4 on a GPU with FP4 tensor cores (Blackwell SM 12.x): the layers' linears multiply NVFP4 x NVFP4 natively.
  model.native_w4a4_ = options.qat == QatMode::W4A4 && options.device.is_cuda() && nvfp4_w4a4_native(options.device);
  const bool train_outer = options.train_last_layers < 0;  // embeddings, final norm, lm_head
  const DType master_dtype = options.bf16_master ? DType::BF16 : DType::F32;
  const DType compute = compute_dtype_for(options.device);
  const bool qat = options.qat != QatMode::Off;
  const bool lora = options.lora.enabled();  // the base frozen as stored; adapters train (model/lora.h)
  NVFP4LM_ASSERT(!lora || (!options.bf16_master && !options.quantize_lm_head),
                 "LoRA keeps F32 adapter masters and the lm_head as stored");

  // Fused update: the trained blocks share one gradient tensor per block weight; packed weights: one dequantized
  // scratch per block projection (qwen3_trainable.h).
  std::array<Tensor, 11> shared_block_grads, shared_block_uses;
  auto make = [&](const std::string& name, bool trainable, bool is_norm, bool quantized, Tensor* shared_grad = nullptr,
                  Tensor* shared_use = nullptr) {
    TrainTensor t;
    t.name = name;
    t.master = load_master(files, name, lora ? (is_norm ? DType::F32 : compute) : master_dtype, options.device);
    if (trainable && shared_grad != nullptr && shared_grad->defined()) {
      t.grad = *shared_grad;
    } else if (trainable) {
      t.grad = Tensor::zeros(t.master.shape(), DType::F32, options.device);
      if (shared_grad != nullptr) *shared_grad = t.grad;
    }
    t.quantized = quantized;
    const DType use_dtype = is_norm ? DType::F32 : compute;
    if (quantized && shared_use != nullptr) {
      if (!shared_use->defined()) *shared_use = Tensor::empty(t.master.shape(), use_dtype, options.device);
      t.use = *shared_use;
      t.keep_packed = true;  // refresh_quantized() fills `packed`
    } else {
      t.use = quantized || t.master.dtype() != use_dtype ? Tensor::empty(t.master.shape(), use_dtype, options.device)
                                                         : t.master;
    }
    if (quantized) {
      const int64_t rows = t.master.dim(0), cols = t.master.dim(1);
      NVFP4LM_CHECK(nvfp4_shape_fits(t.master.shape(), options.block),
                    "{}: [{}, {}] cannot be NVFP4-quantized with {} blocks (needs columns{} divisible by 16); train it "
                    "with --qat off",
                    name, rows, cols, block_name(options.block),
                    options.block == Nvfp4Block::Row1x16 ? "" : " and rows");
    }
    return t;
  };

  // LoRA: a frozen base linear. Under QAT it stays packed NVFP4 (the file's own NVFP4 as stored; a dense file's
  // weights are quantized once, per fused group, by refresh_group after the layer is built) and is dequantized into
  // the shared scratch block by block; without QAT it is the dense weight in the compute dtype.
  auto make_frozen_linear = [&](const std::string& name, int layer, LayerWeight weight, Tensor* shared_use) {
    TrainTensor t;
    t.name = name;
    t.quantized = qat;
    const ModelWeight stored = files.load(name);
    const bool stored_nvfp4 = qat && stored.is_nvfp4();
    if (stored_nvfp4) {
      t.packed = packed_copy(stored.nvfp4, options.device);
    } else {
      t.master = master_from(stored, qat ? DType::F32 : compute, options.device);
    }
    files.release(name);
    const int64_t rows = stored_nvfp4 ? t.packed.rows : t.master.dim(0);
    const int64_t cols = stored_nvfp4 ? t.packed.cols : t.master.dim(1);
    if (qat) {
      if (!shared_use->defined()) *shared_use = Tensor::empty({rows, cols}, compute, options.device);
      t.use = *shared_use;
      t.keep_packed = true;
    } else {
      t.use = t.master;
    }
    if (layer >= model.first_trained_layer_ && options.lora.targets_weight(weight))
      t.lora = make_lora_adapter(name, rows, cols, options.lora, compute, options.device);
    return t;
  };
  model.embed_ = make(std::string(kEmbeddingWeightName), train_outer && !lora, false, false);
  model.layers_.resize(static_cast<size_t>(layers));
  for (int i = 0; i < layers; ++i) {
    auto layer_name = [&](LayerWeight w) { return layer_weight_name(i, w); };
    const bool train = i >= model.first_trained_layer_;
    TrainLayer& l = model.layers_[static_cast<size_t>(i)];
    auto grad = [&](size_t k) { return options.fused_update ? &shared_block_grads[k] : nullptr; };
    auto use = [&](size_t k) { return (options.packed_weights || lora) && qat ? &shared_block_uses[k] : nullptr; };
    const bool train_base = train && !lora;
    auto linear = [&](LayerWeight weight, size_t k) {
      return lora ? make_frozen_linear(layer_name(weight), i, weight, &shared_block_uses[k])
                  : make(layer_name(weight), train, false, qat, grad(k), use(k));
    };
    l.input_norm = make(layer_name(LayerWeight::InputNorm), train_base, true, false, grad(0));
    l.q_proj = linear(LayerWeight::QProj, 1);
    l.k_proj = linear(LayerWeight::KProj, 2);
    l.v_proj = linear(LayerWeight::VProj, 3);
    l.q_norm = make(layer_name(LayerWeight::QNorm), train_base, true, false, grad(4));
    l.k_norm = make(layer_name(LayerWeight::KNorm), train_base, true, false, grad(5));
    l.o_proj = linear(LayerWeight::OProj, 6);
    l.post_attention_norm = make(layer_name(LayerWeight::PostAttentionNorm), train_base, true, false, grad(7));
    l.gate_proj = linear(LayerWeight::GateProj, 8);
    l.up_proj = linear(LayerWeight::UpProj, 9);
    l.down_proj = linear(LayerWeight::DownProj, 10);
    if (lora && qat) {
      // A dense base is quantized once here, per fused group as quantize would (its F32 copy dropped after); a
      // member already packed (NVFP4 in the file) keeps its own scales.
      for (std::initializer_list<TrainTensor*> group :
           {std::initializer_list<TrainTensor*>{&l.q_proj, &l.k_proj, &l.v_proj},
            {&l.o_proj},
            {&l.gate_proj, &l.up_proj},
            {&l.down_proj}}) {
        const auto packed =
            std::count_if(group.begin(), group.end(), [](const TrainTensor* t) { return t->packed.defined(); });
        if (packed == static_cast<std::ptrdiff_t>(group.size())) continue;
        NVFP4LM_CHECK(packed == 0,
                      "{}: the model stores some of its fused group ({}) as NVFP4 and some dense; LoRA keeps an "
                      "NVFP4 base as stored and quantizes a dense one per group, not a mix: train with --qat off, or "
                      "quantize the whole model first (nvfp4lm quantize)",
                      (*group.begin())->name, fused_scale_group((*group.begin())->name));
        refresh_group(group, options.block, nullptr);
        for (TrainTensor* t : group) t->master = Tensor();
        model.lora_base_quantized_ = true;
      }
    }
  }
  const bool train_outer_weights = train_outer && !lora;
  model.final_norm_ = make(std::string(kFinalNormWeightName), train_outer_weights, true, false);
  const bool quantize_head = qat && options.quantize_lm_head;
  if (config.tie_word_embeddings) {
    TrainTensor& head = model.lm_head_;
    head.name = fmt::format("{} (tied to {})", kLmHeadWeightName, kEmbeddingWeightName);
    head.master = model.embed_.master;
    head.grad = model.embed_.grad;  // both uses accumulate into one gradient
    head.quantized = quantize_head;
    head.use = quantize_head ? Tensor::empty(head.master.shape(), compute, options.device) : model.embed_.use;
  } else {
    model.lm_head_ = make(std::string(kLmHeadWeightName), train_outer_weights, false, quantize_head);
  }

  model.layer_groups_.resize(static_cast<size_t>(layers));
  if (lora) {
    // The adapters are the parameters (and the masters of checkpoints): per layer, in the linears' canonical order.
    for (int i = 0; i < layers; ++i) {
      TrainLayer& l = model.layers_[static_cast<size_t>(i)];
      for (TrainTensor* t : {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj}) {
        if (!t->lora) continue;
        LoraAdapter& adapter = *t->lora;
        for (const Parameter& p : {Parameter{lora_a_name(t->name), adapter.a, adapter.grad_a, true},
                                   Parameter{lora_b_name(t->name), adapter.b, adapter.grad_b, true}}) {
          model.all_.push_back(p);
          model.trainable_.push_back(p);
          model.layer_groups_[static_cast<size_t>(i)].push_back(p);
        }
      }
    }
    model.refresh_quantized();
    log::info("training model {}: {}; {} adapter tensors", files.path().string(), model.describe(),
              model.trainable_.size());
    if (model.lora_base_quantized_) log::warn("{}", lora_over_quantized_base_note(files.path().string(), options.qat));
    return model;
  }

  // Parameter lists in the canonical order of io/weight_names.h.
  std::map<std::string, const TrainTensor*> by_name;
  for (const TrainTensor* t : {&model.embed_, &model.final_norm_}) by_name[t->name] = t;
  if (!config.tie_word_embeddings) by_name[model.lm_head_.name] = &model.lm_head_;
  for (const TrainLayer& l : model.layers_) {
    for (const TrainTensor* t : {&l.input_norm, &l.q_proj, &l.k_proj, &l.v_proj, &l.q_norm, &l.k_norm, &l.o_proj,
                                 &l.post_attention_norm, &l.gate_proj, &l.up_proj, &l.down_proj})
      by_name[t->name] = t;
  }
  for (const ExpectedWeight& expected : qwen3_expected_weights(config)) {
    const TrainTensor* t = by_name.at(expected.name);
    const bool decays = expected.kind == WeightKind::AttentionProjection ||
                        expected.kind == WeightKind::MlpProjection || expected.kind == WeightKind::LmHead;
    model.all_.push_back(Parameter{t->name, t->master, t->grad, decays});
    if (!t->trainable()) continue;
    const Parameter& p = model.trainable_.emplace_back(model.all_.back());
    // Fused-update groups.
    if (expected.layer >= 0) {
      model.layer_groups_.resize(static_cast<size_t>(layers));
      model.layer_groups_[static_cast<size_t>(expected.layer)].push_back(p);
    } else if (expected.kind == WeightKind::Embedding) {
      model.embed_group_.push_back(p);
    } else if (expected.kind == WeightKind::FinalNorm) {
      model.final_norm_group_.push_back(p);
    } else {
      model.lm_head_group_.push_back(p);
    }
  }
  model.layer_groups_.resize(static_cast<size_t>(layers));
  model.refresh_quantized();
  log::info("training model {}: {}; {} trainable tensors", files.path().string(), model.describe(),
            model.trainable_.size());
  return model;
}

DType Qwen3Trainable::compute_dtype() const { return compute_dtype_for(options_.device); }

std::string lora_over_quantized_base_note(const std::string& base, QatMode qat) {
  return fmt::format(
      "LoRA over the dense model {} with --qat {}: the adapters train over its NVFP4 quantization (each fused group "
      "quantized as `nvfp4lm quantize` does), so they compute the trained function over `nvfp4lm quantize {} OUT "
      "--format modelopt`, not over {} itself (PEFT, vLLM, generate --lora and --merge-lora over the dense weights "
      "give another one; `eval --lora` measures it); train with --qat off to deploy over the dense model",
      base, qat_mode_name(qat), base, base);
}

std::string Qwen3Trainable::describe() const {
  std::string text = fmt::format("device {}, {} activations, {} masters", options_.device.label(),
                                 options_.device.is_cpu() ? "fp32" : "bf16", options_.bf16_master ? "bf16" : "fp32");
  if (options_.qat == QatMode::Off) {
    text += ", QAT off";
  } else {
    text += fmt::format(", QAT {} (NVFP4 {} blocks, q/k/v and gate/up share tensor scales), lm_head {}",
                        qat_mode_name(options_.qat), block_name(options_.block),
                        lm_head_.quantized ? "quantized" : "unquantized");
  }
  if (options_.lora.enabled()) {
    int adapted_layers = 0;
    for (const std::vector<Parameter>& group : layer_groups_) adapted_layers += group.empty() ? 0 : 1;
    text = fmt::format("{}; LoRA rank {} (alpha {}, scale {}{}) on {} in {} of {} layers, the base frozen{}", text,
                       options_.lora.rank, options_.lora.effective_alpha(), options_.lora.scale(),
                       options_.lora.dropout > 0 ? fmt::format(", dropout {}", options_.lora.dropout) : "",
                       lora_targets_text(options_.lora.targets), adapted_layers, layers_.size(),
                       options_.qat == QatMode::Off ? " as dense weights"
                       : lora_base_quantized_
                           ? " quantized to NVFP4 from its dense weights (dequantized one block at a time)"
                           : " as packed NVFP4 (dequantized one block at a time)");
  }
  if (options_.train_last_layers >= 0) text += fmt::format(", training the last {} layers", options_.train_last_layers);
  if (options_.recompute == Recompute::Block) text += ", activations recomputed per block";
  if (options_.fused_update) text += ", optimizer step fused into the backward";
  if (options_.packed_weights && options_.qat != QatMode::Off && !options_.lora.enabled())
    text += ", NVFP4 forward weights kept packed";
  return text;
}

std::vector<NamedTensor> Qwen3Trainable::master_weights() const {
  std::vector<NamedTensor> out;
  out.reserve(all_.size());
  for (const Parameter& p : all_) out.push_back(NamedTensor{p.name, p.value});
  return out;
}

void Qwen3Trainable::refresh_quantized(UpdatedMasterAmaxes* updated) {
  refresh_embedding(updated);
  refresh_final_norm();
  for (TrainLayer& l : layers_) refresh_layer(l, updated);
  refresh_lm_head(updated);
}

void Qwen3Trainable::refresh_embedding(UpdatedMasterAmaxes* updated) {
  refresh_copy(embed_);  // an unquantized tied lm_head reads the same copy
  if (config_.tie_word_embeddings && lm_head_.quantized) refresh_group({&lm_head_}, options_.block, updated);
}

void Qwen3Trainable::refresh_final_norm() { refresh_copy(final_norm_); }

void Qwen3Trainable::refresh_lm_head(UpdatedMasterAmaxes* updated) {
  if (config_.tie_word_embeddings) return;  // refresh_embedding()
  if (lm_head_.quantized) {
    refresh_group({&lm_head_}, options_.block, updated);
  } else {
    refresh_copy(lm_head_);
  }
}

void Qwen3Trainable::refresh_layer(TrainLayer& l, UpdatedMasterAmaxes* updated) {
  for (TrainTensor* t : {&l.input_norm, &l.q_norm, &l.k_norm, &l.post_attention_norm}) refresh_copy(*t);
  if (options_.lora.enabled()) {  // the base is frozen: only the adapters' forward copies change
    for (TrainTensor* t : {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj})
      if (t->lora) refresh_lora_adapter(*t->lora);
    return;
  }
  if (l.q_proj.quantized) {
    refresh_group({&l.q_proj, &l.k_proj, &l.v_proj}, options_.block, updated, native_w4a4_);
    refresh_group({&l.o_proj}, options_.block, updated, native_w4a4_);
    refresh_group({&l.gate_proj, &l.up_proj}, options_.block, updated, native_w4a4_);
    refresh_group({&l.down_proj}, options_.block, updated, native_w4a4_);
  } else {
    for (TrainTensor* t : {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj})
      refresh_copy(*t);
  }
}

void Qwen3Trainable::unpack_layer(const TrainLayer& l) {
  for (const TrainTensor* t : {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj}) {
    if (!t->keep_packed) continue;
    Tensor use = t->use;
    dequantize_nvfp4(t->packed, use);
  }
}

void Qwen3Trainable::deliver(const GradientSink& sink, std::vector<Parameter>& group,
                             const std::function<void(UpdatedMasterAmaxes*)>& refresh) {
  if (group.empty()) return;
  UpdatedMasterAmaxes updated;  // lives from this group's update to its refresh, no longer
  sink(group, updated);
  refresh(&updated);
  for (Parameter& p : group) p.grad.zero();
}

void Qwen3Trainable::zero_grad() {
  for (Parameter& p : trainable_) p.grad.zero();
}

Qwen3Model Qwen3Trainable::inference_model() const {
  Qwen3Weights weights;
  auto linear = [](const TrainTensor& t) {
    LinearWeight w;
    w.out_features = t.use.dim(0);
    w.in_features = t.use.dim(1);
    if (t.keep_packed) {
      w.nvfp4 = t.packed;  // the shared scratch holds some block's weights; the packed ones are this block's
    } else {
      w.dense = t.use;
    }
    return w;
  };
  weights.embed_tokens = embed_.use;
  for (const TrainLayer& l : layers_) {
    Qwen3LayerWeights& w = weights.layers.emplace_back();
    w.input_norm = l.input_norm.use;
    w.post_attention_norm = l.post_attention_norm.use;
    w.q_norm = l.q_norm.use;
    w.k_norm = l.k_norm.use;
    w.q_proj = linear(l.q_proj);
    w.k_proj = linear(l.k_proj);
    w.v_proj = linear(l.v_proj);
    w.o_proj = linear(l.o_proj);
    w.gate_proj = linear(l.gate_proj);
    w.up_proj = linear(l.up_proj);
    w.down_proj = linear(l.down_proj);
  }
  weights.final_norm = final_norm_.use;
  weights.lm_head = linear(lm_head_);
  Qwen3Model model(config_, std::move(weights));
  if (options_.lora.enabled()) {
    // The adapters as a run-time set of one (model/lora_runtime.h), built from the F32 masters as PEFT would read
    // them: rank, alpha and targets of the run, the adapted layers (--train-last-layers may leave some out).
    PeftAdapter adapter;
    adapter.dir = "(the adapters being trained)";
    adapter.config.rank = options_.lora.rank;
    adapter.config.alpha = options_.lora.effective_alpha();
    for (const LoraTarget target : options_.lora.targets)
      adapter.config.target_modules.emplace_back(lora_target_module(target));
    std::vector<int> adapted;
    for (size_t i = 0; i < layers_.size(); ++i) {
      const TrainLayer& l = layers_[i];
      bool any = false;
      for (const TrainTensor* t :
           {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj}) {
        if (!t->lora) continue;
        any = true;
        adapter.tensors[lora_a_name(t->name)] = t->lora->a;
        adapter.tensors[lora_b_name(t->name)] = t->lora->b;
      }
      if (any) adapted.push_back(static_cast<int>(i));
    }
    if (adapted.size() != layers_.size()) adapter.config.layers_to_transform = adapted;
    std::vector<std::pair<std::string, PeftAdapter>> adapters;
    adapters.emplace_back("policy", std::move(adapter));
    const QuietInfoLogs quiet;  // built for every batch of rollouts: its line would repeat each step
    model.set_lora_adapters(std::make_shared<const LoraAdapterSet>(
        LoraAdapterSet::build(std::move(adapters), config_, compute_dtype(), options_.device)));
  }
  return model;
}

}  // namespace nvfp4lm
