// See nvfp4_group_scale.h.
#include "quant/nvfp4_group_scale.h"

#include <algorithm>

#include "quant/nvfp4.h"
#include "quant/tensor_amax.h"

namespace nvfp4lm {

void Nvfp4GroupScale::add(const Tensor& member, const std::string& what) { add_amax(tensor_amax(member, what)); }

void Nvfp4GroupScale::add_amax(float member_amax) { amax_ = std::max(amax_, member_amax); }

float Nvfp4GroupScale::tensor_scale() const { return nvfp4_tensor_scale(amax_); }

}  // namespace nvfp4lm
