#!/usr/bin/env python3
"""Writes a random PEFT LoRA adapter (adapter_config.json + adapter_model.safetensors, F32) for a Qwen3 config.json:
rank R on the seven decoder linears of every layer, A uniform in +-1/sqrt(in) (PEFT's kaiming-uniform bound), B uniform
in +-B_BOUND (a trained adapter's B is non-zero; PEFT initialises it to zero). For benchmarks of run-time adapters
(`bench infer --lora`, scripts/device-check.sh) on shapes no adapter was trained for; no third-party modules (the GPU
machine has torch, this one not). Values repeat a 64 Ki-element random pattern per scale: their cost, not their
content, is what a benchmark measures.

  scripts/make_random_lora.py MODEL_DIR/config.json OUT [--rank 16] [--alpha 32] [--seed 0] [--b-bound 0.01]
"""
import argparse
import json
import os
import random
import struct

TARGETS = [("self_attn", "q_proj"), ("self_attn", "k_proj"), ("self_attn", "v_proj"), ("self_attn", "o_proj"),
           ("mlp", "gate_proj"), ("mlp", "up_proj"), ("mlp", "down_proj")]
PATTERN = 1 << 16


def shapes(config):
    hidden, inter = config["hidden_size"], config["intermediate_size"]
    heads, kv = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or hidden // heads
    return {"q_proj": (heads * head_dim, hidden), "k_proj": (kv * head_dim, hidden), "v_proj": (kv * head_dim, hidden),
            "o_proj": (hidden, heads * head_dim), "gate_proj": (inter, hidden), "up_proj": (inter, hidden),
            "down_proj": (hidden, inter)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("out")
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--alpha", type=float, default=32.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--b-bound", type=float, default=0.01)
    args = parser.parse_args()
    config = json.load(open(args.config))
    rng = random.Random(args.seed)
    patterns = {}

    def values(count, bound):
        if bound not in patterns:
            patterns[bound] = struct.pack(f"<{PATTERN}f", *(rng.uniform(-bound, bound) for _ in range(PATTERN)))
        whole, rest = divmod(count, PATTERN)
        return patterns[bound] * whole + patterns[bound][: 4 * rest]

    tensors = []  # (name, shape, bytes)
    for layer in range(config["num_hidden_layers"]):
        for block, module in TARGETS:
            out_features, in_features = shapes(config)[module]
            name = f"base_model.model.model.layers.{layer}.{block}.{module}"
            tensors.append((f"{name}.lora_A.weight", [args.rank, in_features],
                            values(args.rank * in_features, 1.0 / in_features ** 0.5)))
            tensors.append((f"{name}.lora_B.weight", [out_features, args.rank],
                            values(out_features * args.rank, args.b_bound)))
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape, data in tensors:
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    header_bytes = json.dumps(header, separators=(",", ":")).encode()
    header_bytes += b" " * (-len(header_bytes) % 8)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "adapter_model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        for _, _, data in tensors:
            f.write(data)
    adapter_config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": None,
                      "r": args.rank, "lora_alpha": args.alpha, "lora_dropout": 0.0,
                      "target_modules": [module for _, module in TARGETS], "bias": "none", "fan_in_fan_out": False,
                      "use_rslora": False, "use_dora": False, "modules_to_save": None, "layers_to_transform": None,
                      "rank_pattern": {}, "alpha_pattern": {}, "inference_mode": True}
    with open(os.path.join(args.out, "adapter_config.json"), "w") as f:
        json.dump(adapter_config, f, indent=2)
    print(f"wrote {args.out}: rank {args.rank} on {len(TARGETS)} linears x {config['num_hidden_layers']} layers, "
          f"{offset / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
