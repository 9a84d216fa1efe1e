// Data-parallel training over a Communicator (issue 32), on the CPU and on GPUs: what N ranks do in one optimizer step
// so that they end it with the weights one process would have (on the CPU bit for bit), and each holds the optimizer
// state of a shard only (ZeRO-1).
//
// Parameters are sharded along the model's parameter order (ParameterShards: contiguous runs, balanced by
// elements, a parameter never split), so a parameter's update is made by one rank exactly as one process makes it:
// its AdamW moments, its stochastic-rounding stream (seeded by its name), its gradient-norm partials.
//
// One step over k micro-batches (train_step.h take_train_step with a DataParallel):
//   1. micro-batch i is rank i mod N's; in round r (micro-batches rN .. rN+N-1) every rank computes its micro-batch's
//      gradient from zero, and the owner of each parameter adds the ranks' gradients onto its accumulator in rank
//      order (reduce_scatter_ordered): acc = 0 + g_0 + g_1 + ... + g_{k-1}, the order in which one process adds
//      them — which it does too (a process adds each micro-batch's gradient, computed from zero, to an accumulator,
//      instead of letting the backward's GEMMs add into the gradients: those sums would group differently);
//   2. the loss statistics of every micro-batch are gathered and added in micro-batch order;
//   3. the gradient norm: each rank's chunk partials (grad_clip.h grad_square_partials) of its accumulators,
//      gathered and added in parameter order;
//   4. each rank updates its parameters with its optimizer (built over owned(): the state of its shard only);
//   5. the updated masters are all-gathered (every rank keeps every master: the forward needs them, and a rank's
//      memory falls by the optimizer state and the accumulators), and every rank refreshes its forward weights.
// One process (N = 1) with one micro-batch a step skips the accumulator: the gradient is the sum.
//
// The gradients' sign of zero is the one thing the two ways could differ in (0 + -0 = +0), and AdamW writes the same
// bits for either.
//
// On CUDA (one GPU a rank; the parameters on the device, a DeviceCollectives given): each rank runs its micro-batches
// with the gradients accumulating in place as one GPU does (the backward's GEMMs add into them), then each gradient
// is reduced onto its owner's (reduce_sum, one group of calls per step: NCCL, or the host-staged stand-in); the norm
// from each rank's sum of squares of its shard, gathered in rank order; the owners' updated masters broadcast
// (one group). The sums' order is the transport's and the micro-batches are grouped per rank, so N GPUs agree with
// one to rounding, not bit for bit (as in every NCCL trainer); the host-staged transport is deterministic for a
// given N.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/parameter.h"
#include "model/qwen3_trainable.h"
#include "train/dist/communicator.h"
#include "train/dist/device_collectives.h"
#include "train/dist/ordered_reduce.h"

namespace nvfp4lm {

// Rank r owns parameters [first[r], first[r + 1]).
struct ParameterShards {
  std::vector<size_t> first;  // ranks + 1 indices, 0 first, the parameter count last

  // Contiguous runs balanced by element count: rank r's run ends at the first parameter boundary at or past
  // r + 1 of N of all elements (a rank may own none when there are fewer parameters than ranks).
  static ParameterShards balance(std::span<const Parameter> parameters, int ranks);
  int ranks() const { return static_cast<int>(first.size()) - 1; }
  size_t begin(int rank) const { return first[static_cast<size_t>(rank)]; }
  size_t end(int rank) const { return first[static_cast<size_t>(rank) + 1]; }
};

class DataParallel {
 public:
  // `parameters`: the model's trainable parameters (Qwen3Trainable::parameters()), the same list on every rank; on
  // CUDA `device` moves them (it must outlive this object), on the CPU it is not used.
  DataParallel(Communicator& comm, std::span<Parameter> parameters, DeviceCollectives* device = nullptr);

  Communicator& comm() const { return *comm_; }
  int rank() const { return comm_->rank(); }
  int size() const { return comm_->size(); }
  const ParameterShards& shards() const { return shards_; }

  // This rank's parameters for its optimizer: the masters, with the step's summed gradient as their gradient (the
  // accumulators: allocated when a step first needs them).
  std::span<Parameter> owned();
  int64_t owned_elements() const;
  // "rank 1 of 3 owns 40 of 121 parameters (33.4 % of the elements)": for the run's set-up lines.
  std::string describe_shard() const;
  // How the gradients are summed, for the same lines: "gradients summed in one process's order" (CPU), "gradients
  // reduced onto their owners with NCCL 2.28.9 over 8 GPUs (...)".
  std::string describe_exchange() const;

  // The step's micro-batches this rank computes: i with i mod size() == rank().
  bool computes(size_t micro_batch) const {
    return micro_batch % static_cast<size_t>(size()) == static_cast<size_t>(rank());
  }

  struct StepOutcome {
    LossStats stats;  // every micro-batch's, added in micro-batch order
    double grad_norm = 0;
    // The parameters and gradients the optimizer takes: owned() (accumulated), or the model's own (one process,
    // one micro-batch).
    std::span<Parameter> update;
  };
  // Steps 1-3 above: forward and backward of this rank's micro-batches, the ordered sums. Every rank calls it with
  // the step's whole list of micro-batches.
  StepOutcome accumulate(Qwen3Trainable& model, std::span<const TrainBatch> micro_batches, float grad_scale,
                         const TrainLoss& loss);
  // Step 5: the owners' updated masters to every rank (nothing for one process).
  void share_masters();

  // Items 0 .. count-1 dealt like micro-batches (item i is rank i mod N's: compute(i) runs there), their statistics
  // gathered and added in item order: what one process adding compute(0), compute(1), ... gets, bit for bit. The
  // evaluation's batches take this path. Every rank calls it with the same count.
  LossStats sum_dealt(size_t count, const std::function<LossStats(size_t)>& compute) const;

 private:
  void ensure_accumulators();
  // Every rank's statistics of its items (i mod N == rank, in order; kStatsFields doubles each), added in item order.
  LossStats stats_in_order(const std::vector<double>& mine, size_t count) const;
  // The CUDA form of accumulate's first part: this rank's micro-batches, then every gradient onto its owner.
  void accumulate_on_device(Qwen3Trainable& model, std::span<const TrainBatch> micro_batches, float grad_scale,
                            const TrainLoss& loss, std::vector<double>& stats);

  Communicator* comm_;
  DeviceCollectives* device_ = nullptr;  // CUDA parameters: their transport
  std::span<Parameter> parameters_;
  ParameterShards shards_;
  std::vector<int64_t> element_bounds_;  // gradients: rank r's elements of the concatenated parameters
  std::vector<int64_t> byte_bounds_;     // masters, the same as bytes (F32 or BF16)
  std::vector<Parameter> owned_;         // CPU: grad is the accumulator, once allocated; CUDA: the model's
  bool accumulators_ = false;
};

}  // namespace nvfp4lm
