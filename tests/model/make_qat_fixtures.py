#!/usr/bin/env python3
"""Reference values for the QAT modes the shared fixtures do not cover (tests/model/test_qwen3_qat_modes.cpp):
W4A4 (activations fake-quantized too) and a quantized lm_head, on the committed tiny models.

Same conventions as tests/reference/make_fixtures.py (float64 math, our NVFP4 codec from nvfp4_ref.py, q/k/v and
gate/up sharing one tensor scale, straight-through estimators), plus:
  - W4A4: the input of every quantized linear is fake-quantized with 1x16 blocks along the features and its own
    tensor scale (amax / (6 * 448) of that [tokens, features] activation), straight-through gradient;
  - quantize_lm_head: lm_head (the embedding matrix when tied) is fake-quantized as its own group.
Cases: "w4a4." (untied, lm_head unquantized), "w4a4_head." (tied, W4A4 and a quantized tied lm_head) and
"w4a16_head." (untied, W4A16 with a quantized lm_head). Saved: loss, and the gradients of a few tensors (2-D ones: every 8th row, of embed_tokens / lm_head every 16th).
    python3 tests/model/make_qat_fixtures.py
"""
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import make_fixtures  # noqa: E402
import nvfp4_ref  # noqa: E402
import qwen3_ref  # noqa: E402
import st_io  # noqa: E402

SAVED_GRADS = ("model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
               "model.layers.0.self_attn.q_norm.weight", "model.layers.1.mlp.down_proj.weight", "model.norm.weight",
               "lm_head.weight")

ROW_SAMPLED = ("model.embed_tokens.weight", "lm_head.weight")


def ste(x, q):
    return x + (q.to(x.dtype) - x).detach()


def fq_weight(params, name, w, quantize_head):
    if name == "lm_head.weight" and not quantize_head:
        return w
    group = make_fixtures.scale_group(name) if name != "lm_head.weight" else [name]
    amax = max(params[n].detach().float().abs().max().item() for n in group)
    return ste(w, nvfp4_ref.fake_quantize(w.detach().float(), tensor_scale=nvfp4_ref.nvfp4_tensor_scale(amax)))


def fq_act(x):
    flat = x.reshape(-1, x.shape[-1])
    return ste(flat, nvfp4_ref.fake_quantize(flat.detach().float())).reshape(x.shape)


def forward(params, cfg, ids, w4a4, quantize_head):
    """qwen3_ref.forward with activation quantization hooks (the same math otherwise)."""
    B, T = ids.shape
    D, Hq, Hkv, eps = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["rms_norm_eps"]
    act = fq_act if w4a4 else (lambda x: x)
    lin = lambda x, name: act(x) @ fq_weight(params, name, params[name], quantize_head).T  # noqa: E731
    cos, sin = qwen3_ref.rope_cos_sin(torch.arange(T).expand(B, T), D, cfg["rope_theta"], torch.float64)
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    x = params["model.embed_tokens.weight"][ids]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = qwen3_ref.rms_norm(x, params[p + "input_layernorm.weight"], eps)
        q = lin(h, p + "self_attn.q_proj.weight").view(B, T, Hq, D)
        k = lin(h, p + "self_attn.k_proj.weight").view(B, T, Hkv, D)
        v = lin(h, p + "self_attn.v_proj.weight").view(B, T, Hkv, D)
        q = qwen3_ref.rms_norm(q, params[p + "self_attn.q_norm.weight"], eps)
        k = qwen3_ref.rms_norm(k, params[p + "self_attn.k_norm.weight"], eps)
        q = q * cos + qwen3_ref.rotate_half(q) * sin
        k = k * cos + qwen3_ref.rotate_half(k) * sin
        k = k.repeat_interleave(Hq // Hkv, dim=2)
        v = v.repeat_interleave(Hq // Hkv, dim=2)
        scores = torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(D)
        attn = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        o = torch.einsum("bhts,bshd->bthd", attn, v).reshape(B, T, Hq * D)
        x = x + lin(o, p + "self_attn.o_proj.weight")
        h = qwen3_ref.rms_norm(x, params[p + "post_attention_layernorm.weight"], eps)
        g = lin(h, p + "mlp.gate_proj.weight")
        u = lin(h, p + "mlp.up_proj.weight")
        x = x + lin(torch.nn.functional.silu(g) * u, p + "mlp.down_proj.weight")
    x = qwen3_ref.rms_norm(x, params["model.norm.weight"], eps)
    head_name = "model.embed_tokens.weight" if cfg["tie_word_embeddings"] else "lm_head.weight"
    head = params[head_name]
    if quantize_head:
        amax = head.detach().float().abs().max().item()
        head = ste(head, nvfp4_ref.fake_quantize(head.detach().float(),
                                                 tensor_scale=nvfp4_ref.nvfp4_tensor_scale(amax)))
        x = act(x)
    return x @ head.T


def run(model_dir, w4a4, quantize_head):
    cfg = st_io_json(os.path.join(model_dir, "config.json"))
    params = {k: v.double().clone().requires_grad_(True)
              for k, v in st_io.load(os.path.join(model_dir, "model.safetensors")).items()}
    ref = st_io.load(os.path.join(model_dir, "reference.safetensors"))
    ids, targets = ref["input_ids"].long(), ref["targets"].long()
    logits = forward(params, cfg, ids, w4a4, quantize_head)
    loss = make_fixtures.loss_of(logits, targets)
    loss.backward()
    return loss.detach(), {k: v.grad for k, v in params.items() if k in SAVED_GRADS}


def st_io_json(path):
    import json
    with open(path) as f:
        return json.load(f)


def main():
    fixtures = os.path.join(HERE, "..", "fixtures")
    out = {}
    for prefix, model, w4a4, head in (("w4a4.", "qwen3-tiny", True, False), ("w4a4_head.", "qwen3-tiny-tied", True, True),
                                      ("w4a16_head.", "qwen3-tiny", False, True)):
        loss, grads = run(os.path.join(fixtures, model), w4a4, head)
        out[prefix + "loss"] = loss.float().reshape(1)
        for k, g in grads.items():
            # Every 16th row of the [vocab, hidden] gradients and every 8th of the others keeps the file small.
            rows = g[::16] if k in ROW_SAMPLED else (g[::8] if g.dim() == 2 else g)
            out[prefix + "grad." + k] = rows.float().contiguous()
        print(f"{prefix} {model}: loss {loss.item():.6f}")
    os.makedirs(os.path.join(HERE, "fixtures"), exist_ok=True)
    st_io.save(out, os.path.join(HERE, "fixtures", "qat_modes.safetensors"),
               {"generator": "tests/model/make_qat_fixtures.py", "torch": torch.__version__})


if __name__ == "__main__":
    main()
