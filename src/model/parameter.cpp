#include "model/parameter.h"

#include <unordered_set>

namespace nvfp4lm {

void check_parameter(const Parameter& parameter) {
  const Tensor& value = parameter.value;
  const Tensor& grad = parameter.grad;
  NVFP4LM_ASSERT(!parameter.name.empty(), "a parameter has no name");
  NVFP4LM_ASSERT(value.defined() && grad.defined(), "parameter {} has no value or no gradient", parameter.name);
  NVFP4LM_ASSERT(value.dtype() == DType::F32 || value.dtype() == DType::BF16,
                 "parameter {}: master weight is {}, expected F32 or BF16", parameter.name, value.str());
  NVFP4LM_ASSERT(grad.dtype() == DType::F32, "parameter {}: gradient is {}, expected F32", parameter.name, grad.str());
  NVFP4LM_ASSERT(value.shape() == grad.shape(), "parameter {}: value {} and gradient {} differ in shape",
                 parameter.name, value.str(), grad.str());
  NVFP4LM_ASSERT(value.is_contiguous() && grad.is_contiguous(), "parameter {} is not contiguous", parameter.name);
  NVFP4LM_ASSERT(value.device() == grad.device(), "parameter {}: value and gradient on different devices",
                 parameter.name);
}

void check_parameters(std::span<const Parameter> parameters) {
  std::unordered_set<std::string> names;
  for (const Parameter& parameter : parameters) {
    check_parameter(parameter);
    NVFP4LM_ASSERT(names.insert(parameter.name).second, "parameter {} appears twice", parameter.name);
  }
}

}  // namespace nvfp4lm
