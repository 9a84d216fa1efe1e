// Optimizer: the interface the training loop and the checkpoint code use, with the bookkeeping every
// AdamW variant shares (slots keyed by parameter name, the step counter, master-weight rounding seeds).
//
// Conventions:
//  - The optimizer is built from the model's parameter list and allocates its state then (zeros), so a
//    checkpoint can be loaded into it before the first step. step() must then be given the same set of
//    parameters (same names and shapes, any order) every time.
//  - step_count() is the number of updates made (torch's state["step"]); the update being made by step()
//    uses t = step_count() + 1 for the bias corrections.
//  - step() reads `grad`, never modifies it (zeroing is the loop's job), and multiplies it by
//    `grad_multiplier` first (clip coefficient * accumulation scale) so no extra pass over gradients is needed.
//    Gradients must be finite: the loop checks the global norm (grad_clip.h) and skips the step otherwise.
//  - BF16 master weights are updated in fp32 and written back with stochastic rounding (stochastic_rounding.h).
//  - state_tensors() returns views of the state keyed "<parameter name>.<state name>": the checkpoint
//    writer saves them and the loader copies into them in place.
//  - A step may also be made in parts (the optimizer step fused into the backward, Qwen3Trainable's GradientSink):
//    begin_step(), then update_parameters() on disjoint groups as their gradients become final (or
//    skip_parameters() for a group whose gradient is not finite), then end_step(), which checks that every
//    parameter was visited once. step() is exactly that sequence over all parameters, so both write the same bits.
//  - Device: all parameters of one optimizer live on one device (an Error otherwise), and the state is allocated
//    there. CPU parameters take the fp32 reference loops; CUDA parameters the kernels of cuda/optim_kernels.h, which
//    write the same bits (same element math, same counter-based rounding noise), one launch per parameter.
//  - step() and update_parameters() also measure, when given an UpdatedMasterAmaxes (quant/master_amax.h), the amax
//    of every master they write (max |stored value|, bf16 after rounding; and the first non-finite element) while
//    they write it, for the QAT refresh that follows (Qwen3Trainable::refresh_quantized), which then skips its own
//    pass over those masters. A chunked update folds its chunks into one amax per parameter.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/parameter.h"
#include "quant/master_amax.h"
#include "train/optim/adamw_math.h"

namespace nvfp4lm {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;  // applied only to parameters with Parameter::weight_decay
  uint64_t seed = 0;          // stochastic rounding of BF16 master weights
};

// Throws Error naming the option when a value is out of range (they come from flags).
void check_adamw_options(const AdamWOptions& options);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // "adamw" or "adamw8bit"; stored in checkpoints and checked when loading.
  virtual std::string_view kind() const = 0;

  // One AdamW update of every parameter with learning rate `lr`; `amaxes` (optional, empty): see the top of this file.
  void step(std::span<Parameter> parameters, double lr, float grad_multiplier = 1.0f,
            UpdatedMasterAmaxes* amaxes = nullptr);

  // The same step in parts (see the top of this file).
  void begin_step(double lr, float grad_multiplier = 1.0f);
  void update_parameters(std::span<Parameter> parameters, UpdatedMasterAmaxes* amaxes = nullptr);
  void skip_parameters(std::span<const Parameter> parameters);  // no update this step (non-finite gradient)
  void end_step();
  void cancel_step();  // a begun step in which nothing was visited yet (e.g. its loss was not finite)
  bool in_step() const { return pending_.has_value(); }
  bool step_has_updates() const;  // a parameter was updated or skipped in the step in progress

  int64_t step_count() const { return step_count_; }
  void set_step_count(int64_t steps);

  // Updates each matrix `rows` rows at a time (0, the default: whole; vectors are always whole), for
  // --step-chunk-rows. The update is
  // element-wise and in place, so chunks change how the work is cut (one launch per chunk on CUDA), never the
  // bits written: rounding noise is drawn by the element's index in the whole parameter.
  void set_chunk_rows(int64_t rows);
  int64_t chunk_rows() const { return chunk_rows_; }

  const AdamWOptions& options() const { return options_; }
  // Where the parameters and the state are (CPU when built from no parameters).
  Device device() const { return device_; }

  // Views of every state tensor, in parameter order ("<name>.exp_avg", ...).
  virtual std::vector<NamedTensor> state_tensors() const = 0;
  size_t state_bytes() const;

  // Kind, step count and hyper-parameters, for the checkpoint (the moments are in state_tensors()).
  virtual nlohmann::json describe() const;

 protected:
  Optimizer(std::span<const Parameter> parameters, const AdamWOptions& options);

  struct Slot {
    std::string name;
    Shape shape;
    bool weight_decay = false;
    uint64_t key = 0;  // hash of the name: seeds stochastic rounding independently of list order
  };

  // Elements [begin, begin + count) of a parameter, in its flattened order.
  struct ElementRange {
    int64_t begin = 0;
    int64_t count = 0;
  };
  // Updates `range` of one parameter with its slot's state. `rounding_seed` seeds BF16 stochastic rounding.
  // `amax` (optional; host memory for CPU parameters, device memory for CUDA ones): the whole parameter's
  // accumulator, into which the update folds every master value it stores (AmaxAccumulator's rules).
  virtual void update(size_t slot_index, Parameter& parameter, const AdamWScalars& scalars, uint64_t rounding_seed,
                      ElementRange range, AmaxAccumulator* amax) = 0;
  // Ranges of a chunked update start at multiples of this many elements (8-bit moments: their block size).
  virtual int64_t chunk_alignment() const { return 1; }

  const std::vector<Slot>& slots() const { return slots_; }

 private:
  size_t find_slot(const Parameter& parameter, size_t position) const;
  // Marks slots visited by the step in progress; an Error when one was already visited.
  void visit(std::span<const Parameter> parameters, std::vector<size_t>& slots);

  struct PendingStep {
    double lr = 0;
    float grad_multiplier = 1.0f;
    std::vector<bool> visited;  // per slot
  };

  AdamWOptions options_;
  Device device_ = Device::cpu();
  std::vector<Slot> slots_;
  std::unordered_map<std::string, size_t> slot_by_name_;
  int64_t step_count_ = 0;
  int64_t chunk_rows_ = 0;
  std::optional<PendingStep> pending_;
};

// Makes an optimizer by kind ("adamw" | "adamw8bit"); Error names the accepted kinds otherwise.
std::unique_ptr<Optimizer> make_optimizer(std::string_view kind, std::span<const Parameter> parameters,
                                          const AdamWOptions& options);

// Reads element i of a contiguous F32 or BF16 master weight as fp32, and writes it back (BF16 with
// stochastic rounding drawn from (seed, i)), returning the value stored as fp32. Shared by the CPU optimizers.
inline float load_master(const void* data, bool is_bf16, int64_t i) {
  return is_bf16 ? bf16_to_float(static_cast<const uint16_t*>(data)[i]) : static_cast<const float*>(data)[i];
}
float store_master(void* data, bool is_bf16, int64_t i, float value, uint64_t rounding_seed);

}  // namespace nvfp4lm
