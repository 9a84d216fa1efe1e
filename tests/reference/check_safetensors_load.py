#!/usr/bin/env python3
"""Checks that safetensors files written by nvfp4lm load in PyTorch (with the `safetensors` package) and hold
the values nvfp4lm says they hold.

    nvfp4lm synth --preset tiny /tmp/m
    nvfp4lm quantize /tmp/m /tmp/m-nvfp4 --format modelopt
    nvfp4lm info /tmp/m-nvfp4 --json --checksums > /tmp/m-nvfp4.expected.json
    python3 tests/reference/check_safetensors_load.py /tmp/m-nvfp4 /tmp/m-nvfp4.expected.json

The expected file is `nvfp4lm info --json --checksums`: for every data file, every tensor's dtype, shape, and the
sum and sum of absolute values of its elements in float64 (packed FP4 bytes summed as integers, F8_E4M3 decoded).
The script loads each file with safetensors.torch.load_file, prints dtype/shape/sum per tensor, and compares.
For a ModelOpt directory (hf_quant_config.json present) it also checks the layout vLLM's modelopt_fp4 loader
relies on: U8 weight [out, in/2], float8_e4m3fn weight_scale [out, in/16], float32 scalar (shape []) weight_scale_2,
a float32 scalar input_scale exactly when quant_algo is NVFP4 (W4A4; a W4A16_NVFP4 export has none), and one
weight_scale_2 shared by q/k/v and by gate/up of a layer.
Exit status 0 when everything matches, 1 otherwise (each mismatch is printed).
"""
import json
import math
import os
import sys

import torch
from safetensors.torch import load_file

DTYPE_NAMES = {
    torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16", torch.uint8: "U8", torch.int8: "I8",
    torch.int32: "I32", torch.int64: "I64",
}
if hasattr(torch, "float8_e4m3fn"):
    DTYPE_NAMES[torch.float8_e4m3fn] = "F8_E4M3"


def sums(t: torch.Tensor):
    values = t.to(torch.float32).to(torch.float64) if t.dtype not in (torch.int64, torch.float64) else t.to(torch.float64)
    return values.sum().item(), values.abs().sum().item()


def close(a: float, b: float, scale: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9 * max(scale, 1e-30))


def check_modelopt_layout(tensors: dict, quant_algo: str, problems: list) -> int:
    if quant_algo not in ("NVFP4", "W4A16_NVFP4"):
        problems.append(f"hf_quant_config.json: quant_algo {quant_algo!r}, expected NVFP4 or W4A16_NVFP4")
    w4a4 = quant_algo == "NVFP4"
    checked = 0
    groups = {}
    for name, scale in tensors.items():
        if not name.endswith(".weight_scale"):
            continue
        prefix = name[: -len(".weight_scale")]
        weight = tensors.get(prefix + ".weight")
        scale_2 = tensors.get(prefix + ".weight_scale_2")
        input_scale = tensors.get(prefix + ".input_scale")
        if weight is None or scale_2 is None:
            problems.append(f"{prefix}: weight and weight_scale_2 must accompany weight_scale")
            continue
        if (input_scale is not None) != w4a4:
            problems.append(f"{prefix}.input_scale: {'missing' if w4a4 else 'present'}, but quant_algo is {quant_algo}")
            continue
        if weight.dtype != torch.uint8 or weight.dim() != 2:
            problems.append(f"{prefix}.weight: expected uint8 [out, in/2], got {weight.dtype} {list(weight.shape)}")
        if DTYPE_NAMES.get(scale.dtype) != "F8_E4M3" or list(scale.shape) != [weight.shape[0], weight.shape[1] * 2 // 16]:
            problems.append(f"{name}: expected float8_e4m3fn [{weight.shape[0]}, {weight.shape[1] * 2 // 16}], "
                            f"got {scale.dtype} {list(scale.shape)}")
        scalars = [(prefix + ".weight_scale_2", scale_2)] + ([(prefix + ".input_scale", input_scale)] if w4a4 else [])
        for scalar_name, scalar in scalars:
            if scalar.dtype != torch.float32 or scalar.dim() != 0:
                problems.append(f"{scalar_name}: expected a float32 scalar (shape []), got {scalar.dtype} "
                                f"{list(scalar.shape)}")
        for fused, members in ((".self_attn.", ("q_proj", "k_proj", "v_proj")), (".mlp.", ("gate_proj", "up_proj"))):
            for member in members:
                if prefix.endswith(fused + member):
                    groups.setdefault(prefix[: -len(member)] + "/".join(members), []).append(scale_2.item())
        checked += 1
    for group, values in groups.items():
        if len(set(values)) != 1:
            problems.append(f"{group}: fused projections must share weight_scale_2, got {values}")
    return checked


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    model_dir, expected_path = sys.argv[1], sys.argv[2]
    with open(expected_path) as f:
        expected = json.load(f)
    if "checksums" not in expected:
        print(f"{expected_path}: no 'checksums'; write it with `nvfp4lm info MODEL --json --checksums`")
        return 2
    problems = []
    all_tensors = {}
    count = 0
    for file_entry in expected["checksums"]:
        path = os.path.join(model_dir, file_entry["file"])
        tensors = load_file(path)
        all_tensors.update(tensors)
        wanted = {t["name"]: t for t in file_entry["tensors"]}
        for name in sorted(set(tensors) - set(wanted)):
            problems.append(f"{path}: {name} loaded but not expected")
        for name, want in wanted.items():
            if name not in tensors:
                problems.append(f"{path}: {name} expected but not loaded")
                continue
            t = tensors[name]
            dtype = DTYPE_NAMES.get(t.dtype, str(t.dtype))
            total, abs_total = sums(t)
            count += 1
            print(f"{file_entry['file']} {name} {dtype} {list(t.shape)} sum={total:.17g} abs_sum={abs_total:.17g}")
            if dtype != want["dtype"]:
                problems.append(f"{name}: dtype {dtype}, expected {want['dtype']}")
            if list(t.shape) != list(want["shape"]):
                problems.append(f"{name}: shape {list(t.shape)}, expected {want['shape']}")
            if not close(total, want["sum"], want["abs_sum"]) or not close(abs_total, want["abs_sum"], want["abs_sum"]):
                problems.append(f"{name}: sum {total!r} / abs_sum {abs_total!r}, expected {want['sum']!r} / "
                                f"{want['abs_sum']!r}")
    quant_config_path = os.path.join(model_dir, "hf_quant_config.json")
    if os.path.exists(quant_config_path):
        with open(quant_config_path) as f:
            quant_algo = json.load(f).get("quantization", {}).get("quant_algo")
        checked = check_modelopt_layout(all_tensors, quant_algo, problems)
        print(f"ModelOpt layout: {checked} quantized weights checked")
    for problem in problems:
        print("MISMATCH", problem)
    print(f"{count} tensors compared, {len(problems)} problems")
    return 1 if problems or count == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
