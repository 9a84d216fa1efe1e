#!/usr/bin/env python3
"""NVFP4 reference codec in numpy, bit-exact with nvfp4lm's C++ codec (src/quant/nvfp4_block.h).

The rule is NVIDIA ModelOpt's NVFP4QTensor (but the tensor scale's round trip), all in float32 (round to nearest even only):
  tensor_scale = 1 / (1 / (amax / (6 * 448)))  (float32; 1 when amax is 0 or the quotient underflows)
  block scale  = e4m3_rne(block_amax / (6 * tensor_scale)); an all-zero block uses 1.0, and scales below 2^-9
                 are raised to 2^-9 (the smallest E4M3 subnormal)
  denominator  = e4m3_to_float(scale) * tensor_scale
  code         = e2m1_rne(x / denominator)     (0 when the denominator is 0)
  value        = e2m1_to_float(code) * denominator
Blocks are 16 consecutive elements of a row ("1d") or 16x16 tiles ("2d", scale stored in all 16 rows).
Codes pack two per byte, element 2i in the low nibble. Inputs may be numpy arrays or torch tensors (torch
1.13 or newer, any float dtype); fake_quantize returns the input's kind.

Run as a script to (re)write the cross-check fixture that tests/quant/test_nvfp4_reference.cpp reads:
    python3 tests/reference/nvfp4_ref.py --out tests/fixtures/nvfp4/reference_case.json
"""
import argparse
import json
import os

import numpy as np

F32 = np.float32
E2M1_VALUES = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=F32)


def _as_f32_matrix(w):
    if hasattr(w, "detach"):  # torch tensor
        w = w.detach().to("cpu").float().numpy()
    x = np.ascontiguousarray(np.asarray(w), dtype=F32)
    if x.ndim != 2:
        raise ValueError(f"NVFP4 needs a [rows, cols] matrix, got shape {x.shape}")
    return x


def e4m3_to_float(b):
    """E4M3 'fn' bytes -> float32 (bias 7, subnormals m/8 * 2^-6, 0x7F/0xFF NaN)."""
    b = np.asarray(b, dtype=np.uint8).astype(np.uint32)
    sign, exponent, mantissa = b >> 7, (b >> 3) & 15, b & 7
    normal = ((sign << 31) | ((exponent + 120) << 23) | (mantissa << 20)).astype(np.uint32).view(F32)
    sub = mantissa.astype(F32) * F32(2.0**-9)
    sub = np.where(sign == 1, -sub, sub).astype(F32)
    out = np.where(exponent == 0, sub, normal).astype(F32)
    return np.where((exponent == 15) & (mantissa == 7), F32(np.nan), out).astype(F32)


def float_to_e4m3_rne(x):
    """float32 -> E4M3 byte, round to nearest even, saturating at +-448 (inf too), NaN -> 0x7F."""
    x = np.asarray(x, dtype=F32)
    bits = x.view(np.uint32)
    sign = ((bits >> 24) & 0x80).astype(np.uint32)
    a = bits & np.uint32(0x7FFFFFFF)
    out = np.zeros(x.shape, dtype=np.uint32)
    sub = a < 0x3C800000  # below 2^-6: integer multiples of 2^-9
    units = a[sub].view(F32) * F32(512.0)
    whole = np.floor(units).astype(np.uint32)
    rem = units - whole.astype(F32)
    whole += ((rem > 0.5) | ((rem == 0.5) & ((whole & 1) == 1))).astype(np.uint32)
    out[sub] = whole
    normal = (a >= 0x3C800000) & (a < 0x43E00000)
    an = a[normal]
    byte = (((an >> 23) - 120) << 3) | ((an & 0x7FFFFF) >> 20)
    rest = an & 0xFFFFF
    byte += ((rest > 0x80000) | ((rest == 0x80000) & ((byte & 1) == 1))).astype(np.uint32)
    out[normal] = byte
    out[(a >= 0x43E00000) & (a <= 0x7F800000)] = 0x7E
    out |= sign
    out[a > 0x7F800000] = 0x7F
    return out.astype(np.uint8)


def float_to_e2m1_rne(y):
    """float32 (already divided by the block scale) -> E2M1 code; ties to even; saturates at 6; zero is +0.
    The magnitude code counts the rounding boundaries below |y| (strict where the tie goes down)."""
    y = np.asarray(y, dtype=F32)
    a = np.abs(y)
    m = ((a > 0.25).astype(np.uint8) + (a >= 0.75) + (a > 1.25) + (a >= 1.75) + (a > 2.5) + (a >= 3.5)
         + (a > 5.0)).astype(np.uint8)
    sign = np.where((y < 0) & (m != 0), np.uint8(8), np.uint8(0))
    return (sign | m).astype(np.uint8)


def _check_block(block, rows, cols):
    if block not in ("1d", "2d"):
        raise ValueError(f"block must be '1d' or '2d', got {block!r}")
    if cols % 16 or cols == 0:
        raise ValueError(f"NVFP4 needs cols to be a positive multiple of 16, got [{rows}, {cols}]")
    if block == "2d" and rows % 16:
        raise ValueError(f"16x16 tiles need rows to be a multiple of 16, got [{rows}, {cols}]")


def _scales_and_denominators(x, block, tensor_scale=None):
    rows, cols = x.shape
    _check_block(block, rows, cols)
    if not np.all(np.isfinite(x)):
        r, c = np.argwhere(~np.isfinite(x))[0]
        raise ValueError(f"non-finite value {x[r, c]} at row {r}, column {c} of [{rows}, {cols}]")
    if tensor_scale is None:
        tensor_scale = nvfp4_tensor_scale(F32(np.max(np.abs(x))) if x.size else F32(0))
    tensor_scale = F32(tensor_scale)
    block_amax = np.abs(x).reshape(rows, cols // 16, 16).max(axis=2)
    if block == "2d":
        block_amax = np.repeat(block_amax.reshape(rows // 16, 16, cols // 16).max(axis=1), 16, axis=0)
    scale = (block_amax / (F32(6.0) * tensor_scale)).astype(F32)
    scale[scale == 0] = F32(1.0)
    scale = np.maximum(scale, F32(2.0**-9))
    scale_bytes = float_to_e4m3_rne(scale)
    denominators = (e4m3_to_float(scale_bytes) * tensor_scale).astype(F32)
    return scale_bytes, denominators, tensor_scale


def nvfp4_tensor_scale(amax):
    """amax / (6 * 448) passed through 1 / (1 / s) in float32, or 1 when the quotient is 0 (nvfp4lm's
    nvfp4_tensor_scale): the round trip moves s one ulp when no float32's reciprocal rounds to it, so that
    compressed-tensors' weight_global_scale = 1 / s reads back as s."""
    tensor_scale = F32(F32(amax) / F32(2688.0))
    if not tensor_scale > 0:
        return F32(1.0)
    round_trip = F32(F32(1.0) / F32(F32(1.0) / tensor_scale))
    return round_trip if round_trip > 0 else tensor_scale


def quantize(w, block="1d", tensor_scale=None):
    """-> (codes uint8 [rows, cols/2], scales uint8 (E4M3 bytes) [rows, cols/16], tensor_scale float32).
    tensor_scale: None for amax / (6*448), or the caller's (groups sharing one scale, as Nvfp4QuantOptions)."""
    x = _as_f32_matrix(w)
    rows, cols = x.shape
    scale_bytes, denominators, tensor_scale = _scales_and_denominators(x, block, tensor_scale)
    safe = np.where(denominators == 0, F32(1.0), denominators)[:, :, None]
    codes = float_to_e2m1_rne((x.reshape(rows, cols // 16, 16) / safe).astype(F32))
    codes = np.where(denominators[:, :, None] == 0, np.uint8(0), codes).reshape(rows, cols)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    return packed, scale_bytes, tensor_scale


def dequantize(codes, scales, tensor_scale):
    """Packed codes [rows, cols/2] + E4M3 scale bytes [rows, cols/16] -> float32 [rows, cols]."""
    codes = np.asarray(codes, dtype=np.uint8)
    rows, cols = codes.shape[0], codes.shape[1] * 2
    unpacked = np.empty((rows, cols), dtype=np.uint8)
    unpacked[:, 0::2] = codes & 0xF
    unpacked[:, 1::2] = codes >> 4
    denominators = (e4m3_to_float(scales) * F32(tensor_scale)).astype(F32)
    values = E2M1_VALUES[unpacked].reshape(rows, cols // 16, 16) * denominators[:, :, None]
    return values.astype(F32).reshape(rows, cols)


def to_bf16_bits(x):
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even (as nvfp4lm's float_to_bf16)."""
    bits = np.asarray(x, dtype=F32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def fake_quantize(w, block="1d", tensor_scale=None):
    """dequantize(quantize(w)) as float32, returned as the input's kind (torch tensor or numpy array)."""
    values = dequantize(*quantize(w, block, tensor_scale))
    if hasattr(w, "detach"):
        import torch
        return torch.from_numpy(values).to(w.device)
    return values


def _fixture_matrix():
    """32x48 float32 with: rows of very different magnitudes, the tensor amax 2688 (tensor scale exactly 1),
    a block of exact E2M1 ties (block amax 6, so scale 1.0), an all-zero block, a block tiny enough for the
    2^-9 scale floor, and a row of bf16-exact values."""
    rng = np.random.default_rng(20240601)
    rows, cols = 32, 48
    x = rng.standard_normal((rows, cols)).astype(F32)
    x *= np.exp2(rng.integers(-10, 6, size=(rows, 1))).astype(F32)
    x[0, 0] = 2688.0
    x[3, 16:32] = [6, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, -0.25, -0.75, -1.25, -1.75, -2.5, -3.5, -5, 0.5]
    x[5, 32:48] = 0.0
    x[7, 0:16] = (np.arange(16, dtype=F32) - 7.5) * F32(1e-7)
    return x


def write_fixture(path):
    x = _fixture_matrix()
    case = {"rows": x.shape[0], "cols": x.shape[1], "input_f32": x.tobytes().hex()}
    for block in ("1d", "2d"):
        codes, scales, tensor_scale = quantize(x, block)
        values = dequantize(codes, scales, tensor_scale)
        assert np.array_equal(fake_quantize(x, block), values)
        case[block] = {
            "tensor_scale_f32": np.array([tensor_scale], dtype=F32).tobytes().hex(),
            "codes": codes.tobytes().hex(),
            "scales": scales.tobytes().hex(),
            "dequant_f32": values.tobytes().hex(),
            "dequant_bf16": to_bf16_bits(values).tobytes().hex(),
        }
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(case, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "..", "fixtures", "nvfp4", "reference_case.json"))
    write_fixture(parser.parse_args().out)
