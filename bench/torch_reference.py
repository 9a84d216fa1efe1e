#!/usr/bin/env python3
"""PyTorch + Hugging Face reference measurements, run in the same session as `nvfp4lm bench` so results are ratios.

    python3 bench/torch_reference.py infer --preset qwen3-4b --prompt-len 512 --gen 256 [--json out.json]
    python3 bench/torch_reference.py train --preset qwen3-4b --seq-len 2048 --batch 4 [--steps 6] [--master fp32|bf16]

The model is random-initialised from the same config as `nvfp4lm synth --preset ...` (weights do not change speed),
or loaded from --model DIR. Inference: bf16, eager attention and SDPA (+ static cache + torch.compile when it
works), greedy, batch 1. Training: bf16 weights + fused AdamW (or fp32 masters + autocast), SDPA, gradient
checkpointing, full parameters. Prints a table and one JSON object per setting.
"""
import argparse
import json
import sys
import time

import torch

PRESETS = {
    "qwen3-4b": dict(vocab_size=151936, hidden_size=2560, intermediate_size=9728, num_hidden_layers=36,
                     num_attention_heads=32, num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6,
                     rope_theta=5000000.0, max_position_embeddings=262144, tie_word_embeddings=True),
    "small": dict(vocab_size=151936, hidden_size=512, intermediate_size=1536, num_hidden_layers=8,
                  num_attention_heads=8, num_key_value_heads=4, head_dim=64, rms_norm_eps=1e-6,
                  rope_theta=1000000.0, max_position_embeddings=4096, tie_word_embeddings=True),
}


def build_model(args, attn, dtype):
    import transformers
    if args.model:
        return transformers.AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=dtype,
                                                                 attn_implementation=attn).cuda()
    cfg = transformers.Qwen3Config(**PRESETS[args.preset])
    cfg._attn_implementation = attn
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.Qwen3ForCausalLM(cfg).to(dtype)
    return model


def sync_time():
    torch.cuda.synchronize()
    return time.perf_counter()


def bench_infer(args, attn, compiled):
    model = build_model(args, attn, torch.bfloat16).eval()
    gen_kwargs = dict(max_new_tokens=args.gen, min_new_tokens=args.gen, do_sample=False)
    if compiled:
        model.generation_config.cache_implementation = "static"
        model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    ids = torch.randint(1000, 100000, (1, args.prompt_len), device="cuda")
    with torch.inference_mode():
        for _ in range(2 if compiled else 1):  # warm-up (compilation)
            model.generate(ids, max_new_tokens=8, min_new_tokens=8, do_sample=False)
        torch.cuda.reset_peak_memory_stats()
        t0 = sync_time()
        model(ids)  # prefill only
        t1 = sync_time()
        prefill_s = t1 - t0
        t0 = sync_time()
        model.generate(ids, **gen_kwargs)
        t1 = sync_time()
    total_s = t1 - t0
    decode_s = max(total_s - prefill_s, 1e-9)
    result = dict(kind="infer", setting=f"bf16 {attn}" + (" static-cache+compile" if compiled else ""),
                  prompt_len=args.prompt_len, gen=args.gen, prefill_tokens_per_s=args.prompt_len / prefill_s,
                  ttft_ms=prefill_s * 1e3, decode_tokens_per_s=(args.gen - 1) / decode_s,
                  peak_gib=torch.cuda.max_memory_allocated() / 2**30)
    del model
    torch.cuda.empty_cache()
    return result


def bench_train(args):
    master_fp32 = args.master == "fp32"
    model = build_model(args, "sdpa", torch.float32 if master_fp32 else torch.bfloat16)
    model.gradient_checkpointing_enable()
    model.config.use_cache = False
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    vocab = model.config.vocab_size
    tokens = args.batch * args.seq_len
    torch.cuda.reset_peak_memory_stats()
    times = []
    for step in range(args.steps):
        ids = torch.randint(0, vocab, (args.batch, args.seq_len), device="cuda")
        t0 = sync_time()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=master_fp32):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(sync_time() - t0)
    steady = sorted(times[2:]) if len(times) > 3 else times
    step_s = steady[len(steady) // 2]
    result = dict(kind="train", setting=f"{'fp32 master + bf16 autocast' if master_fp32 else 'bf16'} sdpa fused-adamw "
                  "grad-ckpt", seq_len=args.seq_len, batch=args.batch, tokens_per_s=tokens / step_s,
                  step_ms=step_s * 1e3, peak_gib=torch.cuda.max_memory_allocated() / 2**30, loss=loss.item())
    del model, opt
    torch.cuda.empty_cache()
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["infer", "train"])
    p.add_argument("--preset", default="qwen3-4b", choices=sorted(PRESETS))
    p.add_argument("--model", help="HF model directory instead of a random preset")
    p.add_argument("--prompt-len", type=int, default=512)
    p.add_argument("--gen", type=int, default=256)
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--master", default="bf16", choices=["bf16", "fp32"])
    p.add_argument("--settings", default="eager,sdpa,compile", help="inference settings to try")
    p.add_argument("--json", help="write results here")
    args = p.parse_args()
    import transformers
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, {torch.cuda.get_device_name()}",
          file=sys.stderr)
    results = []
    if args.mode == "infer":
        for setting in args.settings.split(","):
            try:
                attn = "sdpa" if setting in ("sdpa", "compile") else "eager"
                results.append(bench_infer(args, attn, setting == "compile"))
            except Exception as e:  # report, keep the other settings
                results.append(dict(kind="infer", setting=setting, error=f"{type(e).__name__}: {e}"[:300]))
    else:
        results.append(bench_train(args))
    for r in results:
        print(json.dumps(r))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
