// The harness behind test_backend_ops.cpp (in the spirit of llama.cpp's tests/test-backend-ops.cpp): every
// case builds random F32 inputs on the CPU, rounds them to the dtypes the CUDA op takes (so both sides see the
// same values), runs the CPU reference and the CUDA twin through the public ops/*.h API, and compares each
// output. CUDA outputs start as NaN (poisoned) so an element the op forgot to write fails the comparison, and
// operands that are views into wider buffers keep NaN padding that must survive the op.
//
// Tolerances, stated once (here):
//  - an output of dtype F32 computed on the GPU in fp32: relative L2 error < 1e-5, max abs error < 1e-4 max|ref|
//    (only summation orders differ);
//  - a BF16 output (fp32 math, one rounding to BF16 at the end, or BF16 intermediates such as the cross-entropy
//    logits): relative L2 < 1e-2, max abs < 2e-2 max|ref| (a BF16 rounding is at most 2^-8 relative);
//  - an F32 output of a GEMM on BF16 operands (tensor cores, fp32 accumulation whose internal rounding is not
//    specified): relative L2 < 1e-4, max abs < 1e-3 max|ref|;
//  - scalars (sum of squares, an F32 loss) use the F32 bound; a loss from BF16 logits is bounded per token in
//    absolute terms (2e-2 nats: BF16 rounding moves a logit of magnitude |z| by up to 2^-8 |z|).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/tensor.h"

namespace nvfp4lm::test::backend {

struct Bound {
  double rel_l2;       // ||actual - expected|| / ||expected||
  double max_abs_rel;  // max |actual - expected| / max |expected|
};
inline constexpr Bound kF32Bound{1e-5, 1e-4};
inline constexpr Bound kBF16Bound{1e-2, 2e-2};
inline constexpr Bound kTensorCoreF32Bound{1e-4, 1e-3};
inline Bound bound_for(DType dtype) { return dtype == DType::F32 ? kF32Bound : kBF16Bound; }
// The bound of a GEMM output of dtype `c` from operands of dtype `ab`.
inline Bound product_bound(DType ab, DType c) {
  if (c != DType::F32) return kBF16Bound;
  return ab == DType::F32 ? kF32Bound : kTensorCoreF32Bound;
}

inline constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();

// One compared output of a case.
struct Output {
  std::string name;
  std::vector<float> actual;
  std::vector<float> expected;
  Bound bound;
  int64_t padding_written = 0;  // elements outside a view's window that no longer hold NaN
};

struct Case {
  std::string op;      // the ops/*.h function under test, e.g. "rmsnorm_forward"
  std::string params;  // shapes, dtypes and layout, for messages
  std::function<std::vector<Output>(Rng&)> run;
};

// ---- comparison -----------------------------------------------------------------------------------------------

struct Measure {
  double rel_l2 = 0, max_abs = 0, max_ref = 0;
  int64_t bad_nan = 0;  // NaN where the reference is finite (unwritten or broken)
  bool ok = true;
};

inline Measure measure(const Output& out) {
  Measure m;
  if (out.actual.size() != out.expected.size()) {
    m.ok = false;
    return m;
  }
  double diff2 = 0, ref2 = 0;
  for (size_t i = 0; i < out.actual.size(); ++i) {
    const double a = out.actual[i], e = out.expected[i];
    if (std::isnan(a) && !std::isnan(e)) {
      ++m.bad_nan;
      continue;
    }
    diff2 += (a - e) * (a - e);
    ref2 += e * e;
    m.max_abs = std::max(m.max_abs, std::fabs(a - e));
    m.max_ref = std::max(m.max_ref, std::fabs(e));
  }
  m.rel_l2 = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  const double abs_limit = out.bound.max_abs_rel * (m.max_ref > 0 ? m.max_ref : 1.0);
  m.ok = m.bad_nan == 0 && out.padding_written == 0 && m.rel_l2 < out.bound.rel_l2 && m.max_abs <= abs_limit;
  return m;
}

// ---- tensors --------------------------------------------------------------------------------------------------

inline Device gpu() { return Device::cuda(0); }

// F32 CPU tensor holding `t`'s values rounded to `dtype` (what the CUDA op will see).
inline Tensor round_to(const Tensor& t, DType dtype) {
  if (dtype == DType::F32) return t.contiguous();
  Tensor narrow = Tensor::empty(t.shape(), dtype);
  convert_cpu(t.contiguous(), narrow);
  Tensor back = Tensor::empty(t.shape(), DType::F32);
  convert_cpu(narrow, back);
  return back;
}

// A contiguous CUDA tensor of `dtype` with `t`'s values.
inline Tensor upload(const Tensor& t, DType dtype) {
  Tensor converted = Tensor::empty(t.shape(), dtype);
  convert_cpu(t.contiguous(), converted);
  return converted.to(gpu());
}

inline Tensor full(const Shape& shape, float value) {
  return Tensor::from_floats(std::vector<float>(static_cast<size_t>(shape.numel()), value), shape);
}

inline std::vector<float> download(const Tensor& t) { return to_float_vector(t.to(Device::cpu())); }

// A CUDA operand that is a window into a wider buffer: the last dim padded by `pad` columns of NaN, the window
// starting at column `offset` (an odd offset breaks 16-byte alignment, exercising the unvectorised paths).
struct DeviceView {
  Tensor storage;  // contiguous, on the GPU
  Tensor view;     // storage.narrow(-1, offset, width)
  int64_t offset = 0, width = 0;
};

inline DeviceView upload_view(const Tensor& t, DType dtype, int64_t pad = 0, int64_t offset = 0) {
  std::vector<int64_t> dims = t.shape().to_vector();
  const int64_t width = dims.back();
  dims.back() += pad;
  Tensor wide = full(Shape(dims), kPoison);
  if (t.numel() > 0) wide.narrow(-1, offset, width).copy_from(t);
  DeviceView v;
  v.storage = upload(wide, dtype);
  v.view = v.storage.narrow(-1, offset, width);
  v.offset = offset;
  v.width = width;
  return v;
}

// A poisoned (all NaN) CUDA output of `shape`, optionally a window as above.
inline DeviceView poisoned(const Shape& shape, DType dtype, int64_t pad = 0, int64_t offset = 0) {
  return upload_view(full(shape, kPoison), dtype, pad, offset);
}

inline std::vector<float> read_view(const DeviceView& v) {
  const Tensor host = v.storage.to(Device::cpu());
  return to_float_vector(host.narrow(-1, v.offset, v.width));
}

inline int64_t padding_written(const DeviceView& v) {
  const std::vector<float> all = download(v.storage);
  const int64_t row = v.storage.dim(-1);
  int64_t written = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const int64_t col = static_cast<int64_t>(i) % row;
    if ((col < v.offset || col >= v.offset + v.width) && !std::isnan(all[i])) ++written;
  }
  return written;
}

inline std::vector<float> values(const Tensor& cpu) { return to_float_vector(cpu); }

// The output of a CUDA view against a CPU reference tensor, with the padding check.
inline Output compare_view(const std::string& name, const DeviceView& actual, const Tensor& expected, Bound bound) {
  return Output{name, read_view(actual), values(expected), bound, padding_written(actual)};
}

inline Output compare_scalar(const std::string& name, double actual, double expected, Bound bound) {
  return Output{name, {static_cast<float>(actual)}, {static_cast<float>(expected)}, bound, 0};
}

inline std::string dtype_str(DType dtype) { return std::string(dtype_name(dtype)); }

}  // namespace nvfp4lm::test::backend
