// Qwen3 for training (DESIGN.md §3): fp32 (or bf16) master weights under their Hugging Face names, a forward
// pass that saves what the backward needs, a hand-written backward for every layer, and NVFP4 quantization-aware
// training with a straight-through estimator (STE).
//
// QAT (QatMode::W4A16, the default): each projection (q/k/v/o, gate/up/down; lm_head with quantize_lm_head) is
// used in the forward as deq(Q(W)) — NVFP4 with `block` scales (1x16 or 16x16) and one fp32 tensor scale shared
// by q/k/v of a layer and by gate/up (their joint amax / (6 * 448), io/weight_names.h fused_scale_group), which
// is exactly what the ModelOpt export writes, so the trained forward equals the exported model. The backward is
// the STE: dx = dy · deq(Q(W)), dW = dyᵀ · x. Q(W) is computed by refresh_quantized(), once per optimizer step.
// W4A4 also fake-quantizes the input activations of every quantized linear (1x16 blocks along the features, a
// per-tensor scale from the activation's amax) and passes gradients straight through them; dW uses the
// quantized input. Embeddings, norms and (by default) lm_head stay unquantized.
//
// Precision: CPU computes in fp32; on CUDA activations are bf16 (fp32 accumulation, norms / softmax / loss in
// fp32). Gradients are F32 and ACCUMULATE (+=) over forward_backward calls until zero_grad(); a tied lm_head adds
// its gradient to the embedding's. Activations of every trained block are kept until the backward (the CPU
// target is small models); blocks are run by one function per block (model/qwen3_block.h) so a recompute-per-block
// mode can re-run it from the block's saved input.
//
// Recompute::Block keeps only each trained block's input (the residual stream) through the forward and re-runs
// the block's forward just before its backward, into one shared set of activation buffers: activation memory
// drops from every block's ~30 tensors to one tensor per block plus one block's worth, for one extra forward.
// Gradients are bit-identical to Recompute::None (the forward is deterministic and reads the same weights).
//
// Fused update (TrainModelOptions::fused_update; the low-memory mode): the optimizer step runs inside the
// backward. forward_backward() then takes a GradientSink and calls it with each group of parameters as soon as
// their gradients are final: an untied lm_head, the final norm, each trained block top-down, and last the
// embedding (holding a tied lm_head's part too), with an empty UpdatedMasterAmaxes for the optimizer to fill. After
// the sink returns, the model refreshes that group's forward weights (with the amaxes the update measured) and
// zeroes its gradients. All trained blocks share one set of gradient tensors, so gradient memory is one
// block's plus the outer parameters' instead of the whole model's; parameters()' block gradients are therefore
// only meaningful inside the sink. A non-finite loss skips the backward (the sink is not called). The sink must
// update or skip exactly what it is given (Optimizer::update_parameters / skip_parameters): with the same
// optimizer and no clipping, the result equals an unfused step bit for bit.
//
// Packed forward weights (TrainModelOptions::packed_weights, with QAT): each block projection keeps Q(W) packed
// (4.5 bits a weight) instead of a dense deq(Q(W)) copy, and the forward and backward dequantize one block's
// projections at a time into a scratch shared by all blocks. deq(Q(W)) is the same bits either way, so losses and
// gradients are identical; the dense copies (2 bytes a weight on CUDA) shrink to ~0.56 bytes plus one block.
//
// LoRA (TrainModelOptions::lora, model/lora.h): every base weight is frozen as stored and adapters on the chosen
// linears train. Under QAT the base linears stay packed NVFP4 — the file's own NVFP4 bits when it has them (the
// deployed numerics exactly), a dense file's weights quantized once per fused group — and are dequantized one block at
// a time into a shared scratch (no dense copy of the base); with QAT off they are dense in the compute dtype. The
// embedding, norms and lm_head are used as stored. parameters() and master_weights() are the adapters (PEFT names),
// so checkpoints hold only them; with train_last_layers only those layers get adapters. W4A4 fake-quantizes the
// linears' inputs for the adapters too (they read what the base reads).
//
// train_last_layers = N >= 0 trains only the last N decoder blocks: parameters() lists only theirs, frozen
// weights get no gradient, embeddings / final norm / lm_head stay frozen, and the backward stops at the input of
// the lowest trained block (frozen blocks below it run forward only, without saving activations).
//
// Losses (sums over the non-ignored targets; targets equal to -100 are ignored; targets are already aligned with
// positions, i.e. target[t] is the token expected after ids[t]):
//  - CrossEntropy: token cross-entropy of the lm_head logits (fused lm_head + CE, chunked: no [tokens, vocab]
//    tensor), in nats; `correct` counts argmax hits.
//  - Distillation (TrainLoss with a teacher): ops/distillation.h's weight · τ² · KL(teacher ‖ student) +
//    (1 - weight) · CE per token, fused with the lm_head like CE; `correct` as CE, kl_sum and `agree` (student and
//    teacher argmax equal) besides. The teacher is another Qwen3Trainable (normally the unquantized base, frozen:
//    train_last_layers 0, QAT off) whose final_hidden() runs on the same batch inside this forward, or its top K
//    precomputed and carried by the batch (the K + 1-outcome KL of ops/distillation.h).
//  - L1: a debug loss that exercises the whole backward without the lm_head: per token, mean_j |h_j| of the final
//    hidden state h after the final norm; loss_sum sums it over the non-ignored tokens (loss_sum / tokens = mean
//    |h| over their elements). Its gradient is sign(h) / hidden_size (0 where h == 0); `correct` stays 0.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "io/activation_calibration.h"
#include "io/hf_config.h"
#include "io/model_files.h"
#include "model/lora.h"
#include "model/parameter.h"
#include "model/preference_loss.h"
#include "model/qwen3_block.h"
#include "model/qwen3_model.h"
#include "ops/distillation.h"
#include "ops/rope.h"
#include "quant/master_amax.h"
#include "quant/nvfp4.h"

namespace nvfp4lm {

enum class QatMode { Off, W4A16, W4A4 };
std::string_view qat_mode_name(QatMode mode);   // "off", "w4a16", "w4a4"
QatMode parse_qat_mode(std::string_view name);  // Error listing the names otherwise

enum class Recompute { None, Block };
std::string_view recompute_name(Recompute mode);   // "none", "block"
Recompute parse_recompute(std::string_view name);  // Error naming --recompute and the choices otherwise

struct TrainModelOptions {
  QatMode qat = QatMode::W4A16;
  Nvfp4Block block = Nvfp4Block::Row1x16;  // weight blocks (W4A4 activations always use 1x16)
  bool quantize_lm_head = false;
  int train_last_layers = -1;  // -1: everything (embeddings, all blocks, final norm, lm_head); N: last N blocks
  Device device = Device::cpu();
  bool bf16_master = false;  // BF16 master weights (the optimizer rounds stochastically); gradients stay F32
  Recompute recompute = Recompute::None;
  bool fused_update = false;    // optimizer step inside the backward (see the top of this file)
  bool packed_weights = false;  // QAT: block projections' Q(W) stay packed (see the top of this file)
  LoraOptions lora = {};        // rank > 0: LoRA adapters train over the frozen base (see the top of this file)
};

// Receives a group of parameters whose gradients are final, during a fused-update backward, and an empty
// UpdatedMasterAmaxes for the update of the group (Optimizer::update_parameters fills it; a skipped group leaves it).
using GradientSink = std::function<void(std::span<Parameter>, UpdatedMasterAmaxes&)>;

// One batch. All I32 [B, T] CPU tensors (moved to the model's device here). targets: -100 (kIgnoreIndex) =
// no loss. positions: optional (default 0..T-1 in every row). segment_ids: optional; attention stays inside a
// segment (packed rows; pair them with positions that restart at 0 per sample). teacher_top_k: for a loss with a
// cached teacher (TrainLoss::cached_teacher), the teacher's top K at each trained target in row order (CPU).
// reference_logps: for a preference loss (TrainLoss::preference), one per row, the reference model's summed
// log-probability of the row's trained targets; rows 2p and 2p + 1 are pair p's chosen and rejected completion.
struct TrainBatch {
  Tensor ids, targets, positions, segment_ids;
  TeacherTopK teacher_top_k;
  uint64_t dropout_seed = 0;  // LoRA dropout of a training pass over this batch (the trainer: per step and micro-batch)
  std::vector<double> reference_logps = {};
  // For a policy-gradient loss (TrainLoss::policy_gradient): per row, its completion's advantage; per token ([B * T]
  // row-major, read where a target is scored) the log-probability of the policy that sampled it (empty: this one's
  // own, so the ratio is 1: TRL's num_iterations 1) and the reference's (read when the loss has a KL term).
  std::vector<float> advantages = {};
  std::vector<float> old_logps = {};
  std::vector<float> ref_logps = {};
};

enum class LossKind { CrossEntropy, L1 };
std::string_view loss_kind_name(LossKind kind);  // "ce", "l1"
LossKind parse_loss_kind(std::string_view name);

class Qwen3Trainable;

// A forward's loss: `kind` on the student alone, or with a teacher the distillation loss of ops/distillation.h, the
// student's distribution against the teacher's on the same batch (the teacher's forward runs inside the student's,
// frozen, on the same device: QAD, quantization-aware distillation), mixed with cross-entropy by
// distillation.weight. The teacher must outlive the call and have the student's vocabulary; kind stays CrossEntropy.
// Or, cached_teacher, the teacher's top K precomputed (`nvfp4lm distill-cache`) and carried by each batch
// (TrainBatch::teacher_top_k): ops/distillation.h's K + 1-outcome KL, no teacher forward.
// Or, preference, a preference loss (model/preference_loss.h: DPO or IPO) over pairs of rows, each row one
// completion (no packing), against the batch's reference_logps; loss_sum is then the sum of the pairs' losses.
struct TrainLoss {
  TrainLoss(LossKind loss_kind = LossKind::CrossEntropy) : kind(loss_kind) {}  // implicit: a plain loss
  LossKind kind;
  Qwen3Trainable* teacher = nullptr;
  bool cached_teacher = false;
  DistillationSettings distillation;
  std::optional<PreferenceSettings> preference;
  // Or, policy_gradient, GRPO's clipped policy-gradient loss a token (model/preference_loss.h) with the batch's
  // advantages, sampling log-probabilities and reference; loss_sum sums it over the scored tokens, kl_sum its k3 terms.
  std::optional<PolicyGradientSettings> policy_gradient;
  bool distills() const { return teacher != nullptr || cached_teacher; }
};

struct LossStats {
  double loss_sum = 0;  // summed over non-ignored tokens
  int64_t tokens = 0;   // non-ignored tokens
  int64_t correct = 0;  // CrossEntropy: tokens whose argmax logit is the target
  // Distillation only: Σ KL(teacher ‖ student) at the temperature, and tokens where both argmaxes agree.
  double kl_sum = 0;
  int64_t agree = 0;
  // Preference losses only (then loss_sum sums the pairs' losses): pairs, sums over them of the chosen and the
  // rejected completion's reward (β · log-ratio) and policy log-probability, and pairs whose chosen reward is higher.
  int64_t pairs = 0;
  double chosen_reward_sum = 0, rejected_reward_sum = 0;
  double chosen_logp_sum = 0, rejected_logp_sum = 0;
  int64_t preferred = 0;
  // Policy-gradient losses: tokens whose clipped branch was taken (no signal; TRL's clip_ratio).
  int64_t clipped = 0;
  double mean() const { return tokens > 0 ? loss_sum / static_cast<double>(tokens) : 0.0; }
  double mean_kl() const { return tokens > 0 ? kl_sum / static_cast<double>(tokens) : 0.0; }
  LossStats& operator+=(const LossStats& other);
};

// Non-ignored targets (!= -100) of a batch: the usual denominator of grad_scale.
int64_t count_loss_tokens(const TrainBatch& batch);

class Qwen3Trainable {
 public:
  // Masters from any model file (NVFP4 sources are dequantized into them); calls refresh_quantized().
  static Qwen3Trainable from_files(const ModelFiles& files, const TrainModelOptions& options = {});
  // Move-only: a copy would share the master weights and gradients with the original.
  Qwen3Trainable(Qwen3Trainable&&) = default;
  Qwen3Trainable& operator=(Qwen3Trainable&&) = default;
  Qwen3Trainable(const Qwen3Trainable&) = delete;
  Qwen3Trainable& operator=(const Qwen3Trainable&) = delete;

  const Qwen3Config& config() const { return config_; }
  const TrainModelOptions& options() const { return options_; }
  Device device() const { return options_.device; }
  // W4A4 whose layer linears run NVFP4 x NVFP4 on the FP4 tensor cores ("cuda/nvfp4-mma-fp4": Blackwell SM 12.x
  // with an sm_120a / sm_121a image), the rest of the step as the fake-quantized BF16 GEMMs ("cuda/dequant-gemm").
  bool native_w4a4() const { return native_w4a4_; }
  DType compute_dtype() const;  // F32 on CPU, BF16 on CUDA
  // For logs, e.g. "device cpu, fp32 activations, fp32 masters, QAT w4a16 (NVFP4 1x16 blocks, q/k/v and gate/up
  // share tensor scales), lm_head unquantized".
  std::string describe() const;

  // The trainable parameters (HF names, canonical order; weight_decay for 2-D linears incl. an untied
  // lm_head). Views: the optimizer updates values in place; the backward accumulates into grads.
  std::span<Parameter> parameters() { return trainable_; }
  std::span<const Parameter> parameters() const { return trainable_; }
  // Every master weight (trained or frozen), HF names, canonical order (no lm_head when tied): views for the
  // exporter and checkpoints. After writing into them, call refresh_quantized(). LoRA: the adapters only.
  std::vector<NamedTensor> master_weights() const;
  // Index of the lowest trained decoder block (num_hidden_layers when none trains).
  int first_trained_layer() const { return first_trained_layer_; }

  // Recomputes every weight the forward reads from its master: deq(Q(W)) for quantized linears (group tensor
  // scales), compute-dtype copies where the master's dtype differs. Call after every optimizer step and after
  // loading masters. A no-op for fp32 masters without QAT on the CPU.
  // `updated`: the amaxes measured by the optimizer step just made (Optimizer::step's), for exactly the masters it
  // wrote since the last refresh; the group tensor scales take those instead of reading the masters again (the same
  // values: a maximum is exact). Without it (after loading masters, say) every amax is measured here.
  void refresh_quantized(UpdatedMasterAmaxes* updated = nullptr);

  // Forward + backward: gradients of grad_scale * loss_sum are accumulated into parameters()' grads. With
  // fused_update, `sink` (required) receives each group as its gradients become final (see the top of this file).
  LossStats forward_backward(const TrainBatch& batch, float grad_scale, const TrainLoss& loss = {},
                             const GradientSink* sink = nullptr);
  // Forward only (no activations saved, no gradients).
  LossStats evaluate(const TrainBatch& batch, const TrainLoss& loss = {});
  // Forward only: the final hidden state (after the final norm), [B, T, hidden_size] in compute_dtype() on the
  // model's device: what a teacher gives a distilling student, with lm_head_weights().
  Tensor final_hidden(const TrainBatch& batch);
  // Forward only: the logits F32 [B * T, vocab] on the model's device, exactly as the loss computes them (its lm_head
  // input, W4A4's fake quantization included, and weights): the function training optimizes (parity's
  // train-forward path, tools/parity.h).
  Tensor logits(const TrainBatch& batch);
  // Forward only: each row's summed log-probability of its trained targets (-100 skipped), in row order, exactly as
  // a preference loss computes the policy's (the reference log-probabilities of a preference run).
  std::vector<double> completion_logps(const TrainBatch& batch);
  // The lm_head the forward uses ([vocab, hidden_size]; the embedding when tied).
  const Tensor& lm_head_weights() const { return lm_head_.use; }
  // grads = 0 for every trainable parameter.
  void zero_grad();

  // While set (not null), every forward (training or evaluation) records the amax of each linear's input activation
  // into `calibration` under the linear's weight name ("lm_head.weight" for the head, tied or not) and adds the
  // batch's positions to its token count: activation calibration for ModelOpt exports (io/activation_calibration.h).
  // Recording changes nothing the forward computes. The object must outlive its use.
  void set_calibration(ActivationCalibration* calibration) { calibration_ = calibration; }

  // An inference model over the weights the forward uses (deq(Q(W)) under QAT): shares their storage, so it
  // follows refresh_quantized(). For sampling during training; the exported NVFP4 model computes the same
  // function (up to the packed path's summation order). With LoRA, the frozen base's storage and the adapters' current
  // values as a run-time set of one adapter (index 0; a copy: build a new inference model after an update), so rows
  // run with adapter 0 compute the policy and rows without one the base (the reference).
  Qwen3Model inference_model() const;

 private:
  Qwen3Trainable() = default;
  // hidden_out: stop after the final norm and hand the hidden state over (final_hidden).
  LossStats run(const TrainBatch& batch, float grad_scale, const TrainLoss& loss, bool backward,
                const GradientSink* sink, Tensor* hidden_out = nullptr);
  const RopeTable& rope_for(int64_t max_position);
  // Forward weights recomputed from the masters, per group (refresh_quantized() runs them all); `updated` as there.
  void refresh_embedding(UpdatedMasterAmaxes* updated);  // and a tied lm_head
  void refresh_final_norm();
  void refresh_lm_head(UpdatedMasterAmaxes* updated);  // untied
  void refresh_layer(detail::TrainLayer& layer, UpdatedMasterAmaxes* updated);
  // packed_weights: dequantizes the layer's packed projections into the shared scratch its `use` tensors view.
  void unpack_layer(const detail::TrainLayer& layer);
  // Fused update: hands `group` to the sink, refreshes what refresh() names with the amaxes the sink's update
  // measured, zeroes the group's gradients.
  void deliver(const GradientSink& sink, std::vector<Parameter>& group,
               const std::function<void(UpdatedMasterAmaxes*)>& refresh);

  Qwen3Config config_;
  TrainModelOptions options_;
  detail::TrainTensor embed_, final_norm_, lm_head_;  // lm_head_ aliases embed_'s master / grad when tied
  std::vector<detail::TrainLayer> layers_;
  std::vector<Parameter> all_;        // every master, canonical order (grad undefined when frozen)
  std::vector<Parameter> trainable_;  // the trained subset (same tensors)
  // The trained subset by fused-update group (empty where nothing trains): per layer, and the outer ones.
  std::vector<std::vector<Parameter>> layer_groups_;
  std::vector<Parameter> embed_group_, final_norm_group_, lm_head_group_;
  int first_trained_layer_ = 0;
  std::optional<RopeTable> rope_;
  ActivationCalibration* calibration_ = nullptr;
  bool native_w4a4_ = false;          // see native_w4a4()
  bool lora_base_quantized_ = false;  // LoRA with QAT over a dense base: its linears quantized here (NVFP4)

 public:
  // Whether the adapters train over a base this model quantized from dense weights (lora_over_quantized_base_note).
  bool lora_base_quantized() const { return lora_base_quantized_; }
};

// What a LoRA run over a dense base with QAT logs when it starts and when it exports the adapter: which base the
// adapters' function needs (issue 49).
std::string lora_over_quantized_base_note(const std::string& base, QatMode qat);

}  // namespace nvfp4lm
