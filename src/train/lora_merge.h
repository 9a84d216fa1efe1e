// Merging a LoRA run's adapters into its base: the whole model that computes what base + adapters computed, for the
// exports that write whole models (`nvfp4lm export RUN OUT --merge-lora`).
//
// Every adapted linear becomes W' = W + (alpha / r) · B · A, computed per element in double from the base's values as
// stored (NVFP4 weights dequantized to F32, the values the run's CPU forward read; its CUDA forward read their BF16
// rounding) and the adapters' F32 masters, then rounded once to F32; every other weight is the base's as stored. A
// dense base that the run quantized for its forward (QAT over a BF16 base) is merged as stored too, not as the NVFP4
// weights the adapters were trained against. A BF16 export of the result is therefore round_bf16(W') exactly;
// an NVFP4 export quantizes W' again (the adapters' change is not on the NVFP4 grid): the exported model is close to,
// not equal to, the function the run trained, and `eval --reference` measures by how much.
#pragma once

#include <span>
#include <vector>

#include "io/model_files.h"
#include "model/parameter.h"
#include "train/train_options.h"

namespace nvfp4lm {

struct MergedModel {
  std::vector<NamedTensor> masters;  // every weight of the base's config, HF names, F32 or BF16 on the CPU
  int64_t merged_linears = 0;
};

// `base`: the run's model as it trained on it (open_training_model(run)); `adapters`: PEFT-named A and B tensors of
// every linear the run's --lora-targets give (a LoRA checkpoint's model.safetensors). Error when one is missing,
// misshapen or extra.
MergedModel merge_lora_adapters(const ModelFiles& base, std::span<const NamedTensor> adapters, const TrainOptions& run);

}  // namespace nvfp4lm
