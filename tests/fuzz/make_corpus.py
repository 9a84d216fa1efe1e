#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets: tests/fuzz/corpus/<target>/<seed>.

    python3 tests/fuzz/make_corpus.py [--nvfp4lm BUILD/nvfp4lm]

Seeds are small valid files and near-valid variants (one thing wrong each), so that fuzzing starts next to the
checks and the replay tests (fuzz_replay.<target>, label "fuzz") cover both sides of each. Model and checkpoint
seeds come from the nvfp4lm executable (synth of tests/fuzz/dat_model_config.json, quantize to .dat and ModelOpt,
two training steps of the tiny fixture model with checkpoints); the rest is written here or taken from
tests/fixtures. Each corpus/<target>/ directory is replaced whole (regressions/ is never touched); the whole corpus
stays well under 2 MB. Deterministic except for the timing fields of the training run's trainer_state.json.
"""

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
CORPUS = HERE / "corpus"
CORPUS_LIMIT_BYTES = 2 << 20

# ---- XXH64 (for checksum manifests and the data-position fingerprint) ------------------------------------------
M64 = (1 << 64) - 1
P1, P2, P3, P4, P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63,
                      0x27D4EB2F165667C5)


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def _round(acc, lane):
    return (_rotl((acc + lane * P2) & M64, 31) * P1) & M64


def _merge(acc, val):
    return ((acc ^ _round(0, val)) * P1 + P4) & M64


def xxh64(data: bytes, seed: int = 0) -> int:
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + P1 + P2) & M64, (seed + P2) & M64, seed, (seed - P1) & M64]
        while i + 32 <= n:
            for k in range(4):
                v[k] = _round(v[k], struct.unpack_from("<Q", data, i + 8 * k)[0])
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & M64
        for k in range(4):
            h = _merge(h, v[k])
    else:
        h = (seed + P5) & M64
    h = (h + n) & M64
    while i + 8 <= n:
        h = ((_rotl(h ^ _round(0, struct.unpack_from("<Q", data, i)[0]), 27) * P1) + P4) & M64
        i += 8
    if i + 4 <= n:
        h = ((_rotl(h ^ (struct.unpack_from("<I", data, i)[0] * P1 & M64), 23) * P2) + P3) & M64
        i += 4
    while i < n:
        h = (_rotl(h ^ (data[i] * P5 & M64), 11) * P1) & M64
        i += 1
    h ^= h >> 33
    h = (h * P2) & M64
    h ^= h >> 29
    h = (h * P3) & M64
    h ^= h >> 32
    return h


assert xxh64(b"") == 0xEF46DB3751D8E999  # the published test vector


# ---- helpers ------------------------------------------------------------------------------------------------------
class Seeds:
    """corpus/<target>/, emptied first; add(name, bytes | str | json value)."""

    def __init__(self, target):
        self.dir = CORPUS / target
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)

    def add(self, name, content):
        if isinstance(content, str):
            content = content.encode()
        elif not isinstance(content, (bytes, bytearray)):
            content = json.dumps(content, indent=1, ensure_ascii=False).encode() + b"\n"
        (self.dir / name).write_bytes(bytes(content))


def deep(levels=3000):
    """A JSON value nested `levels` deep (parsers must refuse it before anything recurses over it)."""
    return "[" * levels + "]" * levels


def run(*args, cwd=None):
    result = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"make_corpus: {' '.join(map(str, args))} failed:\n{result.stderr}")
    return result.stdout


# ---- safetensors --------------------------------------------------------------------------------------------------
def safetensors(tensors, metadata=None, header_override=None, pad=True):
    """tensors: [(name, dtype, shape, bytes)] laid out in order."""
    header, data = {}, b""
    for name, dtype, shape, payload in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    if metadata is not None:
        header["__metadata__"] = metadata
    text = (header_override if header_override is not None else json.dumps(header, separators=(",", ":"))).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def safetensors_seeds(seeds, model_dir, modelopt_dir):
    seeds.add("synth-bf16.safetensors", (model_dir / "model.safetensors").read_bytes())
    for path in sorted(modelopt_dir.glob("*.safetensors")):
        seeds.add("modelopt-" + path.name, path.read_bytes())
    f32 = struct.pack("<4f", 1.0, -2.0, 0.5, 3.0)
    all_dtypes = [("f32", "F32", [2, 2], f32), ("f16", "F16", [3], b"\x00\x3c\x00\xc0\x00\x7c"),
                  ("bf16", "BF16", [2], b"\x80\x3f\x00\xc0"), ("u8", "U8", [1, 3], b"\x01\x02\x03"),
                  ("i8", "I8", [2], b"\xff\x01"), ("i32", "I32", [1], struct.pack("<i", -7)),
                  ("i64", "I64", [1], struct.pack("<q", 1 << 40)), ("e4m3", "F8_E4M3", [2], b"\x38\x7e")]
    seeds.add("all-dtypes", safetensors(all_dtypes, metadata={"format": "pt"}))
    seeds.add("empty-header", safetensors([]))
    seeds.add("metadata-only", safetensors([], metadata={"a": "b", "nvfp4lm.optimizer": "{\"kind\": \"adamw\"}"}))
    seeds.add("scalar-and-empty", safetensors([("s", "F32", [], struct.pack("<f", 2.0)), ("e", "F32", [0, 4], b"")]))
    seeds.add("misaligned", safetensors([("b", "U8", [1], b"\x07"), ("f", "F32", [2], f32[:8])], pad=False))
    one = [("w", "F32", [2, 2], f32)]
    good = safetensors(one)
    seeds.add("near-truncated-data", good[:-3])
    seeds.add("near-trailing-bytes", good + b"\x00")
    seeds.add("near-header-too-long", struct.pack("<Q", len(good)) + good[8:])
    seeds.add("near-header-shorter", struct.pack("<Q", struct.unpack_from("<Q", good)[0] - 2) + good[8:])
    seeds.add("near-header-huge", struct.pack("<Q", 1 << 62) + good[8:])
    seeds.add("near-no-length", b"\x10\x00\x00")
    seeds.add("near-offsets-reversed", safetensors(one, header_override=json.dumps(
        {"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [16, 0]}})) + f32)
    seeds.add("near-overlap", safetensors([], header_override=json.dumps(
        {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
         "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})) + f32)
    seeds.add("near-gap", safetensors([], header_override=json.dumps(
        {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
         "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})) + f32[:12])
    seeds.add("near-size-mismatch", safetensors([("w", "F32", [3, 2], f32)]))
    seeds.add("near-bad-dtype", safetensors([("w", "F4", [4], f32[:2])]))
    seeds.add("near-shape-overflow", safetensors([], header_override=json.dumps(
        {"w": {"dtype": "F32", "shape": [1 << 32, 1 << 32], "data_offsets": [0, 16]}})) + f32)
    seeds.add("near-negative-dim", safetensors([], header_override=json.dumps(
        {"w": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 1]}})) + b"\x00")
    seeds.add("near-duplicate-name", safetensors([], header_override=(
        '{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}'))
        + b"\x00\x01")
    seeds.add("near-metadata-number", safetensors(one, metadata={"n": 1}))
    seeds.add("near-not-json", struct.pack("<Q", 8) + b"{\"w\":[1," + f32)
    seeds.add("near-deep-metadata", safetensors([], header_override='{"__metadata__":{"a":' + deep() + "}}"))


# ---- .dat -----------------------------------------------------------------------------------------------------------
def leb128(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def dat_entry(key, type_code, dims, payload):
    key = key.encode() if isinstance(key, str) else key
    out = leb128(len(key)) + key + leb128(type_code) + leb128(len(dims))
    for d in dims:
        out += leb128(d)
    return out + payload


def dat(entries, count=None):
    return leb128(len(entries) if count is None else count) + b"".join(entries)


def dat_seeds(seeds, dat_path):
    seeds.add("synth-nvfp4.dat", dat_path.read_bytes())
    types = [(0, 1), (1, 1), (2, 2), (3, 4), (4, 8), (5, 2), (6, 4), (7, 8), (11, 1), (15, 2), (100, 1), (101, 1)]
    seeds.add("all-types", dat([dat_entry(f"t{code}", code, [2], bytes(range(2 * size))) for code, size in types]))
    seeds.add("empty", dat([]))
    seeds.add("scalar-and-4d", dat([dat_entry("s", 6, [], struct.pack("<f", 1.5)),
                                     dat_entry("e", 6, [1, 1, 2, 0], b"")]))
    qdata = bytes(i % 256 for i in range(32 * 16))  # [32, 16] packed pairs = [32, 32] codes
    seeds.add("legacy-f16-scales", dat([dat_entry("model.layers.0.mlp.up_proj.qdata", 100, [32, 16], qdata),
                                         dat_entry("model.layers.0.mlp.up_proj.scale", 5, [32, 2],
                                                   b"\x00\x3c" * 64)]))
    seeds.add("weight-prefix-u8-scales", dat([dat_entry("model.layers.0.mlp.up_proj.weight.qdata", 0, [32, 16], qdata),
                                               dat_entry("model.layers.0.mlp.up_proj.weight.scale", 0, [32, 2],
                                                         b"\x38" * 64)]))
    good = dat([dat_entry("w", 6, [2], struct.pack("<2f", 1.0, 2.0))])
    seeds.add("near-trailing-byte", good + b"\x00")
    seeds.add("near-truncated", good[:-1])
    seeds.add("near-count-too-big", dat([dat_entry("w", 6, [2], struct.pack("<2f", 1.0, 2.0))], count=2))
    seeds.add("near-overlong-leb128", b"\x81\x80\x80\x80\x80\x80\x80\x80\x80\x80\x00")
    seeds.add("near-key-not-utf8", dat([dat_entry(b"\xff\xfe", 0, [1], b"\x00")]))
    seeds.add("near-bad-type", dat([dat_entry("w", 8, [1], b"\x00")]))
    seeds.add("near-ndim-5", dat([dat_entry("w", 0, [1, 1, 1, 1, 1], b"\x00")]))
    seeds.add("near-dims-overflow", dat([dat_entry("w", 6, [1 << 40, 1 << 40], b"")]))
    seeds.add("near-duplicate-key", dat([dat_entry("w", 0, [1], b"\x00"), dat_entry("w", 0, [1], b"\x01")]))
    seeds.add("near-scale-without-qdata", dat([dat_entry("model.layers.0.mlp.up_proj.scale", 101, [32, 2],
                                                         b"\x38" * 64)]))


# ---- config.json / generation_config.json -----------------------------------------------------------------------
QWEN3_4B = {
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 2560, "initializer_range": 0.02,
    "intermediate_size": 9728, "max_position_embeddings": 262144, "max_window_layers": 36, "model_type": "qwen3",
    "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
    "rope_scaling": None, "rope_theta": 5000000, "sliding_window": None, "tie_word_embeddings": True,
    "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": True, "use_sliding_window": False,
    "vocab_size": 151936}


def hf_config_seeds(seeds, model_dir):
    seeds.add("qwen3-tiny.json", (FIXTURES / "qwen3-tiny" / "config.json").read_bytes())
    seeds.add("synth.json", (model_dir / "config.json").read_bytes())
    seeds.add("generation.json", (model_dir / "generation_config.json").read_bytes())
    seeds.add("qwen3-4b.json", QWEN3_4B)
    seeds.add("generation-eos-list.json", {"bos_token_id": 151643, "eos_token_id": [151645, 151643],
                                           "pad_token_id": 151643, "do_sample": True, "temperature": 0.7})
    variants = {
        "no-head-dim": {"head_dim": None}, "eos-list": {"eos_token_id": [151645, 151643]},
        "architectures-only": {"model_type": None}, "llama": {"model_type": "llama", "architectures": ["LlamaForCausalLM"]},
        "rope-yarn": {"rope_scaling": {"type": "yarn", "factor": 4.0}}, "sliding-window": {"use_sliding_window": True,
                                                                                             "sliding_window": 4096},
        "attention-bias": {"attention_bias": True}, "gelu": {"hidden_act": "gelu"}, "zero-vocab": {"vocab_size": 0},
        "kv-not-dividing": {"num_key_value_heads": 7}, "odd-head-dim": {"head_dim": 127},
        "huge": {"hidden_size": 1 << 40, "num_hidden_layers": 1 << 40}, "eps-string": {"rms_norm_eps": "1e-6"},
        "float-vocab": {"vocab_size": 151936.5}, "negative-eos": {"eos_token_id": -1},
        "modelopt": {"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}},
        "bos-outside-vocab": {"bos_token_id": 1 << 30}, "theta-zero": {"rope_theta": 0},
    }
    for name, change in variants.items():
        config = dict(QWEN3_4B)
        for key, value in change.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
        seeds.add(f"near-{name}.json", config)
    seeds.add("near-array.json", [QWEN3_4B])
    seeds.add("near-truncated.json", json.dumps(QWEN3_4B)[:200])
    seeds.add("near-nested.json", "[" * 100 + "]" * 100)
    seeds.add("near-deep-rope.json", json.dumps(QWEN3_4B)[:-1] + ', "rope_scaling": ' + deep() + "}")


# ---- tokenizer.json / tokenizer_config.json ---------------------------------------------------------------------
def bytes_to_unicode():
    """GPT-2's byte-level alphabet."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def tokenizer_json_seeds(seeds):
    tiny_text = (FIXTURES / "tiny-tokenizer" / "tokenizer.json").read_text()
    tiny = json.loads(tiny_text)
    seeds.add("tiny.json", tiny_text)
    # A minimal complete byte-level BPE: the 256 byte tokens, a few merges, the three ChatML specials.
    alphabet = bytes_to_unicode()
    vocab = {alphabet[b]: i for i, b in enumerate(sorted(alphabet))}
    merges = [["Ġ", "t"], ["h", "e"], ["Ġt", "he"], ["i", "n"], ["Ġ", "a"]]
    for left, right in merges:
        vocab[left + right] = len(vocab)
    specials = [{"id": len(vocab) + i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                 "normalized": False, "special": True} for i, c in enumerate(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])]
    minimal = dict(tiny, added_tokens=specials, model=dict(tiny["model"], vocab=vocab, merges=merges))
    seeds.add("minimal.json", minimal)
    seeds.add("minimal-string-merges.json", dict(minimal, model=dict(minimal["model"], merges=[" ".join(m) for m in merges])))
    seeds.add("minimal-no-normalizer.json", dict(minimal, normalizer=None))
    seeds.add("minimal-think-token.json", dict(minimal, added_tokens=specials + [
        {"id": len(vocab) + 3, "content": "<think>", "single_word": True, "lstrip": True, "rstrip": True,
         "normalized": True, "special": False}]))
    seeds.add("near-wordpiece.json", dict(minimal, model=dict(minimal["model"], type="WordPiece")))
    seeds.add("near-post-processor.json", dict(minimal, post_processor={
        "type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}]}))
    seeds.add("near-added-id-huge.json", dict(minimal, added_tokens=[dict(specials[0], id=1 << 30)]))
    seeds.add("near-duplicate-id.json", dict(minimal, model=dict(minimal["model"], vocab=dict(vocab, extra=0))))
    seeds.add("near-merge-unknown.json", dict(minimal, model=dict(minimal["model"], merges=merges + [["zz", "q"]])))
    seeds.add("near-missing-byte.json", dict(minimal, model=dict(minimal["model"], vocab={
        k: v for k, v in vocab.items() if k != alphabet[ord("a")]})))
    seeds.add("near-bad-regex.json", dict(minimal, pre_tokenizer={"type": "Split", "pattern": {"Regex": "(a|"},
                                                                  "behavior": "Isolated", "invert": False}))
    seeds.add("near-truncated.json", json.dumps(minimal)[:1500])
    seeds.add("near-deep-normalizer.json", json.dumps(minimal)[:-1] + ', "truncation": ' + deep() + "}")


def tokenizer_config_seeds(seeds):
    seeds.add("tiny.json", (FIXTURES / "tiny-tokenizer" / "tokenizer_config.json").read_bytes())
    qwen3 = json.loads((ROOT / "models" / "qwen3-tokenizer" / "tokenizer_config.json").read_text())
    seeds.add("qwen3.json", qwen3)
    template = qwen3.get("chat_template", "")
    seeds.add("template-list.json", dict(qwen3, chat_template=[{"name": "default", "template": template},
                                                              {"name": "tool_use", "template": "{{ x }}"}]))
    seeds.add("instruct-template.json", dict(qwen3, chat_template="{% for m in messages %}<|im_start|>{{ m.role }}\n"
                                                                 "{{ m.content }}<|im_end|>\n{% endfor %}"))
    seeds.add("token-objects.json", dict(qwen3, eos_token={"content": "<|im_end|>", "lstrip": False},
                                         pad_token={"content": "<|endoftext|>"}))
    seeds.add("near-unknown-eos.json", dict(qwen3, eos_token="<nope>"))
    seeds.add("near-eos-number.json", dict(qwen3, eos_token=7))
    seeds.add("near-template-number.json", dict(qwen3, chat_template=3))
    seeds.add("near-empty-list.json", dict(qwen3, chat_template=[]))
    seeds.add("empty.json", "{}")
    seeds.add("near-deep-template.json", '{"eos_token": "<|im_end|>", "chat_template": ' + deep() + "}")


# ---- tokenizer encode / decode ----------------------------------------------------------------------------------
def tokenizer_text_seeds(encode_seeds, decode_seeds):
    texts = [json.loads(line)["text"] for line in (FIXTURES / "tokenizer" / "corpus.jsonl").open()]
    expected = [json.loads(line) for line in (FIXTURES / "tokenizer" / "expected.jsonl").open()][1:]
    step = max(1, len(texts) // 48)
    for i in range(0, len(texts), step):
        if len(texts[i].encode()) <= 4096:
            encode_seeds.add(f"corpus-{i:03d}", texts[i])
    encode_seeds.add("specials", "<|im_start|>system\nx<|im_end|>\n<|im_start|>user\n<think>\n\n</think>\n<|endoftext|>")
    encode_seeds.add("invalid-utf8", b"ok \xff\xfe \xc3\x28 \xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x82")
    encode_seeds.add("combining", "e\u0301 \u1e9b\u0323 \u0958 \uac00\u11a8 A\u030a\u0327")
    encode_seeds.add("whitespace", " \t\n\r\n  \u3000\u00a0 x  \n\n\n   ")
    for i in range(0, len(expected), step * 2):
        ids = expected[i]["ids"][:1000]
        decode_seeds.add(f"expected-{i:03d}", struct.pack(f"<{len(ids)}I", *ids))
    decode_seeds.add("specials", struct.pack("<6I", 151643, 151644, 151645, 151667, 151668, 151665))
    decode_seeds.add("split-emoji", struct.pack("<3I", 145207, 124, 9707))  # a partial UTF-8 sequence, then text
    decode_seeds.add("out-of-range", struct.pack("<3I", 151669, 0x7FFFFFFF, 0xFFFFFFFF))


# ---- training data ------------------------------------------------------------------------------------------------
def dataset_seeds(jsonl, tsv, text):
    chats = [
        {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"},
                      {"role": "assistant", "content": "4"}]},
        {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "<think>greet</think>Hello"},
                      {"role": "user", "content": "Weather?"},
                      {"role": "tool", "content": "{\"sunny\": true}"}, {"role": "assistant", "content": "Sunny."}]},
        {"prompt": "Capital of France?", "completion": "Paris."},
    ]
    jsonl.add("chat.jsonl", "".join(json.dumps(c) + "\n" for c in chats))
    jsonl.add("array.json", json.dumps(chats, indent=1))
    jsonl.add("bom-crlf.jsonl", "\ufeff" + "".join(json.dumps(c) + "\r\n" for c in chats[:2]) + "\r\n")
    jsonl.add("unicode.jsonl", json.dumps({"prompt": "日本語で？ 👍", "completion": "はい、<|im_end|>"}, ensure_ascii=False))
    jsonl.add("no-assistant.jsonl", json.dumps({"messages": [{"role": "user", "content": "only a question"}]}) + "\n")
    bad = {
        "near-unknown-role": {"messages": [{"role": "robot", "content": "x"}]},
        "near-content-number": {"messages": [{"role": "user", "content": 5}]},
        "near-no-messages": {"conversation": []},
        "near-empty-completion": {"prompt": "x", "completion": "  "},
        "near-messages-object": {"messages": {"role": "user"}},
    }
    for name, value in bad.items():
        jsonl.add(name + ".jsonl", json.dumps(chats[0]) + "\n" + json.dumps(value) + "\n")
    jsonl.add("near-not-json.jsonl", '{"prompt": "x", "completion": "y"}\n{"prompt": \n')
    jsonl.add("near-array-of-numbers.json", "[1, 2]")
    jsonl.add("near-deep-content.jsonl", '{"prompt": "x", "completion": "y", "extra": ' + deep() + "}\n")

    tsv.add("pairs.tsv", "# comment\nWhat is 2+2?\t4\n\nline\\nbreak\ttab\\there\n\\#not a comment\tok\n")
    tsv.add("crlf.tsv", "\ufeffa\tb\r\nc\td\r\n")
    tsv.add("unicode.tsv", "猫は？\t動物です。🐈\n")
    tsv.add("near-two-tabs.tsv", "a\tb\tc\n")
    tsv.add("near-no-tab.tsv", "just a line\n")
    tsv.add("near-empty-target.tsv", "prompt\t \n")
    tsv.add("trailing-backslash.tsv", "a\\\tb\\\n")

    text.add("paragraphs.txt", "First document,\nsecond line.\n\nSecond document.\n\n\n\nThird, with <|endoftext|> inside.\n")
    text.add("crlf.txt", "\ufeffone\r\ntwo\r\n\r\nthree\r\n")
    text.add("long-line.txt", "word " * 200 + "\n")
    text.add("unicode.txt", "Ελληνικά 中文 العربية 🙂\n\n\tindented\n")
    text.add("near-blank.txt", " \n\t\n")
    text.add("near-invalid-utf8.txt", b"ok\n\xff\xfe\n")


# ---- checkpoints ------------------------------------------------------------------------------------------------------
# tests/fuzz/fuzz_trainer_state.cpp's fixed loader: samples (ids, mask) and options. Its position is a seed below.
FIXED_LOADER_SAMPLES = [([1, 2, 3, 4], [0, 1, 1, 1]), ([5, 6], [0, 1]), ([7, 8, 9], [0, 0, 1])]


def fixed_loader_position(epoch=0, next_sample=1):
    blob = b""
    for ids, mask in FIXED_LOADER_SAMPLES:
        blob += struct.pack("<Q", len(ids)) + struct.pack(f"<{len(ids)}i", *ids) + bytes(mask)
    return {"format": "nvfp4lm-data-position", "epoch": epoch, "next_sample": next_sample, "seed": 7,
            "shuffle": True, "samples": len(FIXED_LOADER_SAMPLES), "fingerprint": f"{xxh64(blob):016x}",
            "batch_size": 2, "seq_len": 8, "packing": True}


def manifest(files):
    return {"format": "nvfp4lm-checksums", "format_version": 1, "algorithm": "xxh64",
            "files": {name: {"bytes": len(data), "xxh64": f"{xxh64(data):016x}"} for name, data in files.items()}}


def checkpoint_seeds(state_seeds, checksum_seeds, run_dir, work):
    steps = sorted(run_dir.glob("step-*"), key=lambda p: int(p.name.split("-")[1]))
    real = json.loads((steps[-1] / "trainer_state.json").read_text().replace(str(work), "/tmp/corpus").replace(
        str(ROOT), "/nvfp4lm"))
    state_seeds.add("trained.json", real)
    resume = dict(real, data_position=fixed_loader_position(), rng={
        "dropout": {"xoshiro256**": ["0123456789abcdef", "fedcba9876543210", "0000000000000001", "ffffffffffffffff"]}})
    state_seeds.add("resume-fixed-loader.json", resume)
    state_seeds.add("resume-next-epoch.json", dict(resume, data_position=fixed_loader_position(1, 3)))
    state_seeds.add("minimal.json", {"format": "nvfp4lm-trainer-state", "format_version": 1, "step": 3})
    variants = {
        "near-version-2": {"format_version": 2}, "near-step-negative": {"step": -1}, "near-format": {"format": "x"},
        "near-rng-short": {"rng": {"a": {"xoshiro256**": ["0123456789abcdef"]}}},
        "near-rng-not-hex": {"rng": {"a": {"xoshiro256**": ["zz", "0", "1", "2"]}}},
        "near-position-wrong-seed": {"data_position": dict(fixed_loader_position(), seed=8)},
        "near-position-past-end": {"data_position": fixed_loader_position(0, 4)},
        "near-config-seq-len-string": {"config": dict(real["config"], seq_len="32")},
        "near-config-unknown-qat": {"config": dict(real["config"], qat="w2a2")},
        "near-metrics-object": {"metrics": {"loss": 1}, "totals": []},
        "near-model-config-missing": {"model": {}},
    }
    for name, change in variants.items():
        state_seeds.add(name + ".json", dict(resume, **change))
    state_seeds.add("near-deep-metrics.json", json.dumps(resume)[:-1] + ', "metrics": ' + deep() + "}")

    # The files fuzz_checksums.cpp writes beside the manifest.
    files = {"model.safetensors": b"model bytes\n", "optimizer.safetensors": b"o" * 100}
    checksum_seeds.add("valid.json", manifest(files))
    checksum_seeds.add("trained.json", (steps[-1] / "checksums.json").read_bytes())
    checksum_seeds.add("extra-file.json", manifest(dict(files, **{"trainer_state.json": b"{}"})))
    wrong = manifest(files)
    wrong["files"]["model.safetensors"]["xxh64"] = "0000000000000000"
    checksum_seeds.add("near-wrong-sum.json", wrong)
    short = manifest(files)
    short["files"]["optimizer.safetensors"]["bytes"] = 99
    checksum_seeds.add("near-wrong-size.json", short)
    for name, change in {"near-slash-name": {"files": {"../x": {"bytes": 1, "xxh64": "0" * 16}}},
                         "near-missing-required": {"files": {"model.safetensors": manifest(files)["files"]["model.safetensors"]}},
                         "near-version-2": {"format_version": 2}, "near-algorithm": {"algorithm": "sha256"},
                         "near-bytes-negative": {"files": {"model.safetensors": {"bytes": -1, "xxh64": "0" * 16}}},
                         "near-files-array": {"files": []}}.items():
        checksum_seeds.add(name + ".json", dict(manifest(files), **change))
    checksum_seeds.add("near-deep-files.json", json.dumps(manifest(files))[:-1] + ', "extra": ' + deep() + "}")


# ---- gguf -----------------------------------------------------------------------------------------------------------
GGUF_TYPES = {"f32": (0, 1, 4), "f16": (1, 1, 2), "q4_0": (2, 32, 18), "q8_0": (8, 32, 34), "q6_K": (14, 256, 210),
              "bf16": (30, 1, 2), "nvfp4": (40, 64, 36)}


def gguf_string(text):
    data = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(data)) + data


def gguf_value(kind, value):
    """(type id, bytes) of a metadata value; kind is a struct code, "s" (string), "b" (bool) or ("a", kind)."""
    codes = {"B": 0, "b8": 1, "H": 2, "h": 3, "I": 4, "i": 5, "f": 6, "q": 11, "Q": 10, "d": 12}
    if kind == "s":
        return 8, gguf_string(value)
    if kind == "b":
        return 7, struct.pack("<B", value)
    if isinstance(kind, tuple):
        inner = kind[1]
        type_id = 8 if inner == "s" else 9 if isinstance(inner, tuple) else codes[inner]
        body = b"".join(gguf_value(inner, v)[1] for v in value)
        return 9, struct.pack("<IQ", type_id, len(value)) + body
    return codes[kind], struct.pack("<" + ("b" if kind == "b8" else kind), value)


def gguf(metadata, tensors, alignment=32, version=3, magic=b"GGUF", offsets=None):
    """metadata: [(key, kind, value)]; tensors: [(name, type name or id, dims fastest-first, data bytes)]."""
    head = magic + struct.pack("<IQQ", version, len(tensors), len(metadata))
    for key, kind, value in metadata:
        type_id, body = gguf_value(kind, value)
        head += gguf_string(key) + struct.pack("<I", type_id) + body
    data, positions = b"", []
    for name, type_name, dims, payload in tensors:
        data += b"\0" * (-len(data) % alignment)
        positions.append(len(data))
        data += payload
    data += b"\0" * (-len(data) % alignment)
    for i, (name, type_name, dims, payload) in enumerate(tensors):
        type_id = GGUF_TYPES[type_name][0] if isinstance(type_name, str) else type_name
        offset = positions[i] if offsets is None else offsets[i]
        head += gguf_string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        head += struct.pack("<IQ", type_id, offset)
    head += b"\0" * (-len(head) % alignment)
    return head + data


def gguf_seeds(seeds):
    def payload(type_name, elements, fill=0x11):
        _, block, size = GGUF_TYPES[type_name]
        return bytes((fill + i) % 256 for i in range(elements // block * size))

    meta = [("general.architecture", "s", "qwen3"), ("general.name", "s", "seed"), ("qwen3.block_count", "I", 1),
            ("qwen3.rope.freq_base", "f", 1e6), ("tokenizer.ggml.add_bos_token", "b", 0),
            ("tokenizer.ggml.tokens", ("a", "s"), ["a", "b", "<|im_end|>"]),
            ("tokenizer.ggml.token_type", ("a", "i"), [1, 1, 3]), ("general.count", "Q", 1 << 40),
            ("general.offset", "q", -5), ("general.ratio", "d", 0.25), ("general.small", "b8", -1),
            ("general.short", "h", -2), ("general.ushort", "H", 7), ("general.byte", "B", 200)]
    tensors = [("token_embd.weight", "bf16", [64, 3], payload("bf16", 192)),
               ("blk.0.attn_norm.weight", "f32", [64], struct.pack("<64f", *[1.0] * 64)),
               ("blk.0.attn_q.weight", "nvfp4", [64, 2], payload("nvfp4", 128)),
               ("blk.0.attn_q.scale", "f32", [1], struct.pack("<f", 0.5)),
               ("blk.0.ffn_up.weight", "q4_0", [64, 2], payload("q4_0", 128)),
               ("blk.0.ffn_down.weight", "q8_0", [32, 2], payload("q8_0", 64)),
               ("output.weight", "q6_K", [256, 1], payload("q6_K", 256)),
               ("blk.0.attn_k.weight", "f16", [8, 2], payload("f16", 16))]
    seeds.add("model.gguf", gguf(meta, tensors))
    seeds.add("empty.gguf", gguf([], []))
    seeds.add("aligned-64.gguf", gguf([("general.alignment", "I", 64)], tensors[:3], alignment=64))
    seeds.add("version-2.gguf", gguf(meta[:2], tensors[:2], version=2))
    seeds.add("near-magic.gguf", gguf(meta, tensors, magic=b"GGUG"))
    seeds.add("near-version-1.gguf", gguf(meta, tensors, version=1))
    seeds.add("near-truncated.gguf", gguf(meta, tensors)[:-40])
    seeds.add("near-duplicate-key.gguf", gguf(meta + [meta[0]], tensors))
    seeds.add("near-duplicate-tensor.gguf", gguf(meta, tensors + [tensors[0]]))
    seeds.add("near-nested-array.gguf", gguf([("x", ("a", ("a", "I")), [[1], [2]])], []))
    seeds.add("near-alignment-3.gguf", gguf([("general.alignment", "I", 3)], tensors[:1]))
    seeds.add("near-alignment-type.gguf", gguf([("general.alignment", "Q", 32)], tensors[:1]))
    seeds.add("near-unknown-type.gguf", gguf([], [("w", 77, [32], b"\0" * 32)]))
    seeds.add("near-partial-block.gguf", gguf([], [("w", "q8_0", [48], payload("q8_0", 32) + b"\0" * 16)]))
    seeds.add("near-rank-5.gguf", gguf([], [("w", "f32", [1, 1, 1, 1, 1], b"\0" * 4)]))
    seeds.add("near-misaligned.gguf", gguf([], tensors[:2], offsets=[0, 4]))
    seeds.add("near-overlap.gguf", gguf([], tensors[1:3], offsets=[0, 0]))
    seeds.add("near-past-end.gguf", gguf([], tensors[1:2], offsets=[1 << 20]))
    seeds.add("near-huge-dims.gguf", gguf([], [("w", "f32", [1 << 40, 1 << 40], b"")]))
    seeds.add("near-huge-array.gguf", gguf([("x", ("a", "I"), [1, 2])], []).replace(struct.pack("<Q", 2),
                                                                                     struct.pack("<Q", 1 << 60), 1))
    seeds.add("near-bool-2.gguf", gguf([("flag", "b", 2)], []))
    seeds.add("near-bad-value-type.gguf", gguf([("x", "I", 1)], []).replace(struct.pack("<I", 4), struct.pack("<I", 13), 1))


# ---- main -----------------------------------------------------------------------------------------------------------
def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nvfp4lm", default=str(ROOT / "build" / "nvfp4lm"), help="the nvfp4lm executable")
    parser.add_argument("--only", choices=["gguf"], help="rewrite only this target's seeds (written here, no run)")
    args = parser.parse_args()
    if args.only == "gguf":
        gguf_seeds(Seeds("gguf"))
        return
    exe = Path(args.nvfp4lm).resolve()
    if not exe.is_file():
        sys.exit(f"make_corpus: {exe} not found (build it, or name it with --nvfp4lm)")

    with tempfile.TemporaryDirectory(prefix="nvfp4lm-corpus-") as tmp:
        work = Path(tmp)
        env_log = ["--log-level", "warn"]
        model = work / "model"
        run(exe, *env_log, "synth", "--config", HERE / "dat_model_config.json", model)
        run(exe, *env_log, "quantize", model, work / "dat", "--format", "dat")
        run(exe, *env_log, "quantize", model, work / "modelopt", "--format", "modelopt")
        data = work / "data.jsonl"
        data.write_text("".join(json.dumps({"prompt": f"Say {w}.", "completion": f"{w}!"}) + "\n"
                                for w in ["hi", "yes", "no", "ok"]))
        run_dir = work / "run"
        run(exe, *env_log, "train", "--model", FIXTURES / "qwen3-tiny", "--tokenizer", FIXTURES / "tiny-tokenizer",
            "--data", data, "--output", run_dir, "--max-steps", "2", "--seq-len", "32", "--batch", "2",
            "--save-every", "1")

        safetensors_seeds(Seeds("safetensors"), model, work / "modelopt")
        dat_files = sorted((work / "dat").glob("*.dat"))
        if len(dat_files) != 1:
            sys.exit(f"make_corpus: expected one .dat file in {work / 'dat'}, found {dat_files}")
        dat_seeds(Seeds("dat"), dat_files[0])
        hf_config_seeds(Seeds("hf_config"), model)
        tokenizer_json_seeds(Seeds("tokenizer_json"))
        tokenizer_config_seeds(Seeds("tokenizer_config"))
        tokenizer_text_seeds(Seeds("tokenizer_encode"), Seeds("tokenizer_decode"))
        dataset_seeds(Seeds("dataset_jsonl"), Seeds("dataset_tsv"), Seeds("dataset_text"))
        checkpoint_seeds(Seeds("trainer_state"), Seeds("checksums"), run_dir, work)
        gguf_seeds(Seeds("gguf"))

    total = sum(p.stat().st_size for p in CORPUS.rglob("*") if p.is_file())
    count = sum(1 for p in CORPUS.rglob("*") if p.is_file())
    print(f"make_corpus: {count} seeds, {total / 1024:.0f} KiB in {CORPUS.relative_to(ROOT)}")
    if total > CORPUS_LIMIT_BYTES:
        sys.exit(f"make_corpus: the corpus is {total} bytes, over the {CORPUS_LIMIT_BYTES}-byte budget")


if __name__ == "__main__":
    main()
