#!/usr/bin/env python3
"""Reference fixtures for the Qwen3 model tests (DESIGN.md §6).

Builds tiny random Qwen3 models (untied and tied lm_head), saves them as HF-layout directories (config.json +
model.safetensors, F32), and saves reference outputs computed in float64:
  logits, the mean cross-entropy loss, every parameter gradient, and the losses of 5 AdamW steps (with
  gradient clipping), for: plain fine-tuning (qat off), NVFP4 fake-quant w4a16 with a straight-through
  estimator (our codec replicated in nvfp4_ref.py; q/k/v and gate/up share one tensor scale per layer, as
  exported), 2D-block fake-quant, and packed rows (segment ids).

Uses HF transformers (Qwen3ForCausalLM) when importable and cross-checks it against qwen3_ref.py; otherwise
qwen3_ref.py alone. Runs on CPU with torch 1.13 or 2.x:
    python3 tests/reference/make_fixtures.py --out tests/fixtures
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nvfp4_ref  # noqa: E402
import qwen3_ref  # noqa: E402
import st_io  # noqa: E402

BASE_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 512, "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 16, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "max_position_embeddings": 4096,
    "tie_word_embeddings": False, "hidden_act": "silu", "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32", "initializer_range": 0.02,
    "use_sliding_window": False, "sliding_window": None, "rope_scaling": None,
}
ADAMW = {"lr": 5e-3, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 0.1, "max_grad_norm": 1.0, "steps": 5}
B, T = 2, 12


def decays(name):
    """Weight decay applies to 2-D linear weights (and an untied lm_head), never to embeddings or norms."""
    return name.endswith("_proj.weight") or name == "lm_head.weight"


def make_inputs(cfg, seed):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, cfg["vocab_size"], (B, T), generator=g)
    targets = torch.full((B, T), -100, dtype=torch.int64)
    targets[:, :-1] = ids[:, 1:]
    targets[0, :3] = -100  # a masked prompt, as chat data has
    targets[1, 5] = -100
    # Packed rows: row 0 holds samples of lengths 5 and 7, row 1 of lengths 4, 4, 4.
    segments = torch.tensor([[0] * 5 + [1] * 7, [0] * 4 + [1] * 4 + [2] * 4])
    positions = torch.zeros(B, T, dtype=torch.int64)
    for b in range(B):
        for t in range(T):
            positions[b, t] = 0 if t == 0 or segments[b, t] != segments[b, t - 1] else positions[b, t - 1] + 1
    packed_targets = targets.clone()
    for b in range(B):
        for t in range(T - 1):
            if segments[b, t] != segments[b, t + 1]:
                packed_targets[b, t] = -100  # never predict across a sample boundary
    return ids, targets, segments, positions, packed_targets


def scale_group(name):
    """Linears that share one NVFP4 tensor scale (vLLM/TensorRT-LLM fuse them into one GEMM): q/k/v, gate/up."""
    for members in (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj")):
        for m in members:
            if name.endswith(m + ".weight"):
                return [name.replace(m, other) for other in members]
    return [name]


def fake_quant_fn(block, params):
    """Forward weight = deq(Q(W)) with the group's shared tensor scale (amax over the group), identity gradient."""
    def lw(name, w):
        if name == "lm_head.weight":
            return w  # lm_head stays unquantized by default (DESIGN.md §3)
        amax = max(params_now[n].detach().float().abs().max().item() for n in scale_group(name))
        q = nvfp4_ref.fake_quantize(w.detach().float(), block=block,
                                    tensor_scale=nvfp4_ref.nvfp4_tensor_scale(amax)).to(w.dtype)
        return w + (q - w).detach()  # straight-through estimator
    params_now = params
    return lw


def loss_of(logits, targets):
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                             ignore_index=-100, reduction="mean")


def run_case(params, cfg, ids, targets, positions=None, segments=None, lw=None):
    ps = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    logits = qwen3_ref.forward(ps, cfg, ids, positions, segments, lw(ps) if lw else None)
    loss = loss_of(logits, targets)
    loss.backward()
    return logits.detach(), loss.detach(), {k: v.grad.detach() for k, v in ps.items()}


def adamw_losses(params, cfg, ids, targets, positions=None, segments=None, lw=None):
    """Plain-loop AdamW identical to torch.optim.AdamW (decoupled decay) with global-norm clipping."""
    ps = {k: v.clone() for k, v in params.items()}
    m = {k: torch.zeros_like(v) for k, v in ps.items()}
    s = {k: torch.zeros_like(v) for k, v in ps.items()}
    a = ADAMW
    losses = []
    for step in range(1, a["steps"] + 1):
        _, loss, grads = run_case(ps, cfg, ids, targets, positions, segments, lw)
        losses.append(loss.item())
        total = torch.sqrt(sum((g.double() ** 2).sum() for g in grads.values()))
        coef = min(1.0, a["max_grad_norm"] / (total.item() + 1e-6))
        for k in ps:
            g = grads[k] * coef
            if decays(k):
                ps[k] = ps[k] * (1 - a["lr"] * a["weight_decay"])
            m[k] = a["beta1"] * m[k] + (1 - a["beta1"]) * g
            s[k] = a["beta2"] * s[k] + (1 - a["beta2"]) * g * g
            bc1 = 1 - a["beta1"] ** step
            bc2 = 1 - a["beta2"] ** step
            denom = (s[k].sqrt() / (bc2 ** 0.5)) + a["eps"]
            ps[k] = ps[k] - (a["lr"] / bc1) * m[k] / denom
    _, final_loss, _ = run_case(ps, cfg, ids, targets, positions, segments, lw)
    return torch.tensor(losses + [final_loss.item()]), ps


class hf_in_float64:
    """HF computes RMSNorm and the attention softmax in float32 even in a float64 model (transformers 5.x casts
    there), which alone leaves ~1e-7 between it and a float64 reference. Inside this context both run in the model's
    dtype, so the cross-check compares the model's structure (weights, RoPE, attention, norms) at float64 precision.
    RoPE stays as HF computes it (fp32 angles), which qwen3_ref.py replicates."""

    def __init__(self, model):
        self.model = model

    def __enter__(self):
        self.softmax = torch.nn.functional.softmax

        def softmax(x, dim=None, _stacklevel=3, dtype=None):
            if dtype is not None and x.dtype == torch.float64:
                dtype = torch.float64
            return self.softmax(x, dim=dim, dtype=dtype)

        torch.nn.functional.softmax = softmax
        for module in self.model.modules():
            if type(module).__name__.endswith("RMSNorm"):
                eps = getattr(module, "variance_epsilon", getattr(module, "eps", 1e-6))
                module.forward = (lambda m, e: lambda x: qwen3_ref.rms_norm(x, m.weight, e))(module, eps)
        return self

    def __exit__(self, *exc):
        torch.nn.functional.softmax = self.softmax
        return False


def check_against_hf(params, cfg, ids):
    try:
        import transformers
    except ImportError:
        print("transformers not available: fixtures come from qwen3_ref.py alone")
        return None
    hf_cfg = transformers.Qwen3Config(**{k: v for k, v in cfg.items() if k not in ("architectures", "model_type")})
    hf_cfg._attn_implementation = "eager"
    model = transformers.Qwen3ForCausalLM(hf_cfg).double().eval()
    state = {k: v for k, v in params.items()}
    if cfg["tie_word_embeddings"]:
        state["lm_head.weight"] = params["model.embed_tokens.weight"]
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if "rotary" not in k]
    assert not missing and not unexpected, (missing, unexpected)
    with torch.no_grad(), hf_in_float64(model):
        hf_logits = model(input_ids=ids).logits
        ours = qwen3_ref.forward(params, cfg, ids)
    err = ((hf_logits - ours).norm() / hf_logits.norm()).item()
    print(f"transformers {transformers.__version__}: qwen3_ref vs HF logits rel err {err:.2e}")
    assert err < 1e-10, "qwen3_ref.py disagrees with HF transformers"
    return hf_logits


def build(out_dir, name, tied, seed):
    cfg = dict(BASE_CONFIG, tie_word_embeddings=tied)
    params = qwen3_ref.init_params(cfg, seed)
    model_dir = os.path.join(out_dir, name)
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    st_io.save({k: v.float() for k, v in params.items()}, os.path.join(model_dir, "model.safetensors"))

    ids, targets, segments, positions, packed_targets = make_inputs(cfg, seed + 1)
    hf_logits = check_against_hf(params, cfg, ids)
    ref = {"input_ids": ids.int(), "targets": targets.int(), "segment_ids": segments.int(),
           "positions": positions.int(), "packed_targets": packed_targets.int()}

    cases = [("", None, None, targets, None), ("qat.", lambda ps: fake_quant_fn("1d", ps), None, targets, None),
             ("qat2d.", lambda ps: fake_quant_fn("2d", ps), None, targets, None),
             ("packed.", None, (positions, segments), packed_targets, None)]
    if tied:
        cases = cases[:1] + cases[1:2]  # tied: plain and w4a16 (keeps fixtures small)
    for prefix, lw, packing, tgt, _ in cases:
        pos, seg = packing if packing else (None, None)
        logits, loss, grads = run_case(params, cfg, ids, tgt, pos, seg, lw)
        if prefix == "" and hf_logits is not None:
            assert torch.allclose(logits, hf_logits, rtol=1e-10, atol=1e-12)
        ref[prefix + "logits"] = logits.float()
        ref[prefix + "loss"] = loss.float().reshape(1)
        if prefix != "qat2d.":
            for k, g in grads.items():
                ref[prefix + "grad." + k] = g.float()
            losses, final = adamw_losses(params, cfg, ids, tgt, pos, seg, lw)
            ref[prefix + "adamw_losses"] = losses.float()
            for k in ("model.norm.weight", "model.layers.0.self_attn.q_proj.weight"):
                ref[prefix + "adamw_final." + k] = final[k].float()
        print(f"{name}: {prefix or 'plain.'} loss {loss.item():.6f}"
              + (f" adamw {[round(x, 6) for x in ref[prefix + 'adamw_losses'].tolist()]}" if prefix != "qat2d." else ""))
    meta = {"format": "pt", "adamw": json.dumps(ADAMW), "generator": "tests/reference/make_fixtures.py",
            "torch": torch.__version__, "reference_precision": "float64"}
    st_io.save(ref, os.path.join(model_dir, "reference.safetensors"), meta)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "fixtures"))
    args = parser.parse_args()
    torch.manual_seed(0)
    build(args.out, "qwen3-tiny", tied=False, seed=1234)
    build(args.out, "qwen3-tiny-tied", tied=True, seed=4321)


if __name__ == "__main__":
    main()
