// CUDA twins of the optimizer's element work (train/optim/), implemented in optim_kernels.cu. Raw-pointer
// launchers: adamw.cpp, adamw8bit.cpp and grad_clip.cpp check the tensors and call these (the .cu stays free of
// Tensor and fmt, whose compile-time format strings nvcc cannot compile in C++20). Everything runs on cuda::stream()
// of the current device; all pointers are device pointers unless said otherwise.
//
// What matches the CPU reference, and how:
//  - adamw_step / adamw8bit_step: bit-identical masters and moments (codes and block maxima for 8-bit). Same element
//    math (adamw_math.h, each operation rounded on its own: unfused_math.h), same counter-based noise for bf16
//    masters and 8-bit codes (stochastic_rounding.h, core/rng.h), same per-element moment codecs (moment_quant.h,
//    with the tables copied into the kernel's shared memory). Block maxima are maxima, so their order is free.
//    Given an AmaxAccumulator (quant/amax_accumulator.h), both also fold every master value they store (after
//    bf16 rounding) into it: max |x| and the first non-finite element, for the QAT refresh that follows
//    (quant/master_amax.h UpdatedMasterAmaxes). Exact, so equal to the CPU's and to a separate amax pass.
//  - gradient sum of squares: fp32 squares accumulated in double in a fixed tree of its own (not the CPU's chunk
//    order): the same bits on every run and launch shape, within ~1e-15 relative of the CPU value.
//  - scale_in_place: one fp32 multiply per element, as the CPU.
#pragma once

#include <cstdint>

#include "quant/amax_accumulator.h"
#include "train/optim/adamw_math.h"  // AdamWScalars

namespace nvfp4lm::cuda {

// One AdamW update of `count` elements. master: F32, or BF16 (as uint16_t) when master_bf16, written back with
// stochastic rounding from counter_uniform(rounding_seed, first_element + element). grad: F32, read only. exp_avg,
// exp_avg_sq: F32, updated in place. The pointers may start inside a parameter (an update in chunks,
// --step-chunk-rows): first_element is where, so the rounding noise is the whole parameter's. amax (device memory,
// optional): the whole parameter's accumulator, which every chunk's launch folds into (non-finite elements by their
// index in the whole parameter).
void adamw_step(void* master, bool master_bf16, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t count,
                const AdamWScalars& scalars, uint64_t rounding_seed, uint64_t first_element = 0,
                AmaxAccumulator* amax = nullptr);

// The 8-bit state of one parameter (AdamW8bit): codes of `count` elements, one absmax per kMomentBlockSize block.
struct Moments8bit {
  int8_t* exp_avg_codes = nullptr;
  float* exp_avg_absmax = nullptr;
  uint8_t* exp_avg_sq_sqrt_codes = nullptr;
  float* exp_avg_sq_sqrt_absmax = nullptr;
};

// Seeds of the three rounding streams (adamw8bit.cpp derives the moment seeds from the master's).
struct Rounding8bitSeeds {
  uint64_t master = 0;
  uint64_t exp_avg = 0;
  uint64_t exp_avg_sq_sqrt = 0;
};

// One AdamW update with block-quantized moments: per block decode, update in fp32, re-encode with fresh maxima. A
// chunk of a parameter starts at a block boundary (first_element % kMomentBlockSize == 0; the absmax pointers
// point at its first block). amax: as adamw_step's.
void adamw8bit_step(void* master, bool master_bf16, const float* grad, const Moments8bit& moments, int64_t count,
                    const AdamWScalars& scalars, const Rounding8bitSeeds& seeds, uint64_t first_element = 0,
                    AmaxAccumulator* amax = nullptr);

// Sum of squares of fp32 data in two passes: sum_of_squares_partials writes one double per tile of `count` elements
// to partials[0, sum_of_squares_partial_count(count)); after the partials of every tensor are written (one buffer),
// sum_of_squares_total adds `count` partials in a fixed tree, writes the total to *total (device) and returns it
// (synchronizing the stream).
int64_t sum_of_squares_partial_count(int64_t count);
void sum_of_squares_partials(const float* data, int64_t count, double* partials);
double sum_of_squares_total(const double* partials, int64_t count, double* total);

// data[i] *= factor (gradient clipping).
void scale_in_place(float* data, int64_t count, float factor);

}  // namespace nvfp4lm::cuda
