"""A plain PyTorch Qwen3 (the math of HF's modeling_qwen3.py, written out) used by the fixture scripts.

Why a second implementation: HF transformers exists only on the GPU machine. make_fixtures.py uses HF when it is
importable (and checks this module against it), and this module otherwise, so fixtures can be regenerated anywhere
with torch alone. It also supports what HF's eager path does not expose directly: packed rows with per-sample
attention (segment ids) and NVFP4 fake-quantized linears with a straight-through estimator.
"""
import math

import torch

LINEAR_NAMES = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")


def param_names(cfg):
    names = ["model.embed_tokens.weight"]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        names += [p + "input_layernorm.weight"]
        names += [p + n + ".weight" for n in LINEAR_NAMES[:3]]
        names += [p + "self_attn.q_norm.weight", p + "self_attn.k_norm.weight", p + "self_attn.o_proj.weight"]
        names += [p + "post_attention_layernorm.weight"]
        names += [p + n + ".weight" for n in LINEAR_NAMES[4:]]
    names.append("model.norm.weight")
    if not cfg["tie_word_embeddings"]:
        names.append("lm_head.weight")
    return names


def init_params(cfg, seed, dtype=torch.float64):
    """N(0, 0.02) linears/embeddings like HF's init; norm weights 1 + 0.1 N(0,1) so the tests see real norms."""
    g = torch.Generator().manual_seed(seed)
    H, I, D = cfg["hidden_size"], cfg["intermediate_size"], cfg["head_dim"]
    Hq, Hkv, V = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["vocab_size"]
    shapes = {"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,), "lm_head.weight": (V, H)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": (H,), p + "post_attention_layernorm.weight": (H,),
                       p + "self_attn.q_proj.weight": (Hq * D, H), p + "self_attn.k_proj.weight": (Hkv * D, H),
                       p + "self_attn.v_proj.weight": (Hkv * D, H), p + "self_attn.o_proj.weight": (H, Hq * D),
                       p + "self_attn.q_norm.weight": (D,), p + "self_attn.k_norm.weight": (D,),
                       p + "mlp.gate_proj.weight": (I, H), p + "mlp.up_proj.weight": (I, H),
                       p + "mlp.down_proj.weight": (H, I)})
    params = {}
    for name in param_names(cfg):
        shape = shapes[name]
        if len(shape) == 1:
            t = 1.0 + 0.1 * torch.randn(shape, generator=g, dtype=torch.float32)
        else:
            t = 0.02 * torch.randn(shape, generator=g, dtype=torch.float32)
        params[name] = t.to(dtype)
    return params


def rms_norm(x, w, eps):
    var = x.pow(2).mean(-1, keepdim=True)
    return x * torch.rsqrt(var + eps) * w


def rope_cos_sin(positions, head_dim, theta, dtype):
    # As HF: inv_freq in fp32 from an int64 arange, angles in fp32, then cast.
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    freqs = positions.float()[..., None] * inv_freq  # [B, T, D/2]
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x):
    d = x.shape[-1] // 2
    return torch.cat([-x[..., d:], x[..., :d]], dim=-1)


def forward(params, cfg, input_ids, positions=None, segment_ids=None, linear_weight=None):
    """Logits [B, T, V]. `linear_weight(name, W)` maps a master weight to the one used in the forward
    (identity, or fake-quant with a straight-through estimator)."""
    B, T = input_ids.shape
    H, D = cfg["hidden_size"], cfg["head_dim"]
    Hq, Hkv, eps = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["rms_norm_eps"]
    lw = linear_weight or (lambda name, w: w)
    dtype = params["model.embed_tokens.weight"].dtype
    if positions is None:
        positions = torch.arange(T).expand(B, T)
    cos, sin = rope_cos_sin(positions, D, cfg["rope_theta"], dtype)
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    mask = causal.expand(B, T, T)
    if segment_ids is not None:
        mask = mask & (segment_ids[:, :, None] == segment_ids[:, None, :])
    x = params["model.embed_tokens.weight"][input_ids]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, params[p + "input_layernorm.weight"], eps)
        q = (h @ lw(p + "self_attn.q_proj.weight", params[p + "self_attn.q_proj.weight"]).T).view(B, T, Hq, D)
        k = (h @ lw(p + "self_attn.k_proj.weight", params[p + "self_attn.k_proj.weight"]).T).view(B, T, Hkv, D)
        v = (h @ lw(p + "self_attn.v_proj.weight", params[p + "self_attn.v_proj.weight"]).T).view(B, T, Hkv, D)
        q = rms_norm(q, params[p + "self_attn.q_norm.weight"], eps)
        k = rms_norm(k, params[p + "self_attn.k_norm.weight"], eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = Hq // Hkv
        k = k.repeat_interleave(rep, dim=2)
        v = v.repeat_interleave(rep, dim=2)
        scores = torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(D)
        scores = scores.masked_fill(~mask[:, None, :, :], float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        o = torch.einsum("bhts,bshd->bthd", attn, v).reshape(B, T, Hq * D)
        x = x + o @ lw(p + "self_attn.o_proj.weight", params[p + "self_attn.o_proj.weight"]).T
        h = rms_norm(x, params[p + "post_attention_layernorm.weight"], eps)
        g = h @ lw(p + "mlp.gate_proj.weight", params[p + "mlp.gate_proj.weight"]).T
        u = h @ lw(p + "mlp.up_proj.weight", params[p + "mlp.up_proj.weight"]).T
        x = x + (torch.nn.functional.silu(g) * u) @ lw(p + "mlp.down_proj.weight", params[p + "mlp.down_proj.weight"]).T
    x = rms_norm(x, params["model.norm.weight"], eps)
    head = params["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else params["lm_head.weight"]
    if not cfg["tie_word_embeddings"]:
        head = lw("lm_head.weight", head)
    return x @ head.T
