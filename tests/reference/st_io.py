"""Minimal safetensors reader/writer (no dependency on the `safetensors` package), for fixture scripts.

Works with any torch version (1.13 CPU here, 2.x on the GPU machine). Tensors are written little-endian,
C-contiguous, with 8-byte-aligned header padding, as the format requires.
"""
import json
import struct

import numpy as np
import torch

_TO_NAME = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
            torch.int32: "I32", torch.int64: "I64", torch.uint8: "U8", torch.int8: "I8"}
_FROM_NAME = {v: k for k, v in _TO_NAME.items()}


def _bytes_of(t: torch.Tensor) -> bytes:
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def save(tensors: dict, path: str, metadata: dict | None = None) -> None:
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        data = _bytes_of(t)
        header[name] = {"dtype": _TO_NAME[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = metadata or {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def load(path: str) -> dict:
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = _FROM_NAME[info["dtype"]]
        buf = raw[base + begin: base + end]
        if dtype == torch.bfloat16:
            arr = np.frombuffer(buf, dtype=np.int16).copy()
            t = torch.from_numpy(arr).view(torch.bfloat16)
        else:
            np_dtype = {torch.float32: np.float32, torch.float64: np.float64, torch.float16: np.float16,
                        torch.int32: np.int32, torch.int64: np.int64, torch.uint8: np.uint8, torch.int8: np.int8}[dtype]
            t = torch.from_numpy(np.frombuffer(buf, dtype=np_dtype).copy())
        out[name] = t.reshape(info["shape"])
    return out
