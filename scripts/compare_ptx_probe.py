#!/usr/bin/env python3
"""Compare two PTX probe dumps (tests/emu/ptx_probe.h): a GPU's and the emulated device's.

usage: compare_ptx_probe.py GPU_DUMP EMULATED_DUMP

Every family must match bit for bit except the two whose rounding PTX leaves to the hardware: ex2.approx (compared
within 2 ulp, specials exactly) and the mma accumulation (within 8 ulp; the emulator rounds the exact sum once).
Prints one line per family and the first differing lines; exits 1 if anything differs beyond its bound. Any
difference is an emulator gap to fix (docs/cuda-emulation.md), or a bound to justify.
"""
import math
import struct
import sys

ULP_BOUNDS = {"ex2.approx.ftz": 2, "mma.m16n8k16.bf16": 8}


def as_float(word):
    return struct.unpack("<f", struct.pack("<I", word))[0]


def ulps(a, b):
    """Distance in units in the last place between two float32 bit patterns (None if one is NaN or inf)."""
    fa, fb = as_float(a), as_float(b)
    if math.isnan(fa) or math.isnan(fb) or math.isinf(fa) or math.isinf(fb):
        return None

    def ordered(w):  # monotone integer image of the float order
        return w if w < 0x80000000 else -(w & 0x7FFFFFFF)

    return abs(ordered(a) - ordered(b))


def same_special(a, b):
    fa, fb = as_float(a), as_float(b)
    if math.isnan(fa) and math.isnan(fb):
        return True
    return a == b


def read(path):
    records = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2:
                records.append((parts[0], parts[1], [int(w, 16) for w in parts[2:]], line.rstrip("\n")))
    return records


def family(name):
    return name.split(".mode")[0] if name.startswith("shfl") else name


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    gpu, emulated = read(sys.argv[1]), read(sys.argv[2])
    if len(gpu) != len(emulated):
        print(f"different line counts: GPU {len(gpu)}, emulated {len(emulated)} (different probe versions?)")
        return 1
    stats = {}
    shown = 0
    for (name, index, words, line), (name2, index2, words2, line2) in zip(gpu, emulated):
        fam = family(name)
        s = stats.setdefault(fam, {"lines": 0, "exact": 0, "bounded": 0, "differ": 0, "max_ulp": 0})
        s["lines"] += 1
        if (name, index) != (name2, index2) or len(words) != len(words2):
            s["differ"] += 1
            continue
        if words == words2:
            s["exact"] += 1
            continue
        bound = ULP_BOUNDS.get(fam)
        within = bound is not None
        if within:
            for i, (a, b) in enumerate(zip(words, words2)):
                if fam == "ex2.approx.ftz" and i == 0:  # the input
                    within = within and a == b
                    continue
                if a == b or same_special(a, b):
                    continue
                distance = ulps(a, b)
                if distance is None or distance > bound:
                    within = False
                else:
                    s["max_ulp"] = max(s["max_ulp"], distance)
        if within:
            s["bounded"] += 1
        else:
            s["differ"] += 1
            if shown < 10:
                print(f"  GPU:      {line}\n  emulated: {line2}")
                shown += 1
    failed = False
    for fam, s in stats.items():
        bound = ULP_BOUNDS.get(fam)
        extra = f", {s['bounded']} within {bound} ulp (max {s['max_ulp']})" if bound else ""
        print(f"{fam:34s} {s['lines']:5d} lines: {s['exact']} bit-identical{extra}, {s['differ']} differ")
        failed = failed or s["differ"] > 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
