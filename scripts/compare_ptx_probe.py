#!/usr/bin/env python3
"""Compare two PTX probe dumps (tests/emu/ptx_probe.h): a GPU's and the emulated device's.

usage: compare_ptx_probe.py GPU_DUMP EMULATED_DUMP

Every family must match bit for bit except where PTX leaves the result to the hardware:
  - ex2.approx: within 2 ulp, specials exactly.
  - the mma accumulation: within 8 ulp of the result, or within 2^-20 of the sum of the magnitudes of its 17 terms
    (16 products and the accumulator). The emulator rounds the exact sum once; the tensor core adds the products
    with a truncated alignment, whose error scales with the terms, so after cancellation the result's ulp is no
    measure (the H200 dump has a 32-ulp case of that kind). The terms are recomputed from the probe's inputs
    (mma_term_magnitudes mirrors ptx_probe.cu's generator).
  - shfl lanes whose source lane is outside the member mask: undefined in CUDA (a source lane must be named in the
    mask); the hardware returns the value, the emulator a poison (0xffffffff). Such lanes are not compared.
Prints one line per family and the first differing lines; exits 1 if anything differs beyond its bound. Any
difference is an emulator gap to fix (docs/cuda-emulation.md), or a bound to justify.
"""
import math
import re
import struct
import sys

ULP_BOUNDS = {"ex2.approx.ftz": 2, "mma.m16n8k16.bf16": 8}
MMA_RELATIVE_TO_TERMS = 2.0 ** -20
MASK64 = (1 << 64) - 1


class ProbeRandom:
    """ptx_probe.cu's Random (splitmix64, its uniform() and bf16()), to recompute the mma inputs."""

    def __init__(self, seed):
        self.state = seed

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def u32(self):
        return self.next() >> 32

    def uniform(self, low, high):  # exact in float32 for the ranges used (see ptx_probe.cu)
        return low + (high - low) * float(self.next() >> 40) * 2.0 ** -24

    def bf16(self):
        pick = self.u32() % 16
        if pick == 0:
            return 0
        if pick == 1:
            return (self.u32() & 0x807F) | 0x0001
        value = self.uniform(-4.0, 4.0) * 2.0 ** (self.u32() % 9 - 4)
        bits = struct.unpack("<I", struct.pack("<f", value))[0]
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def bf16_value(bits):
    return as_float(bits << 16)


def mma_term_magnitudes(cases=6, seed=20261124):
    """Per probe line (32 lanes x cases), the 4 outputs' sums of |a_k b_k| over k plus |c|: ptx_probe.cu's
    probe_mma inputs (the first probe run) through the m16n8k16 fragment layout (PTX ISA: lane = 4 g + t holds
    A rows g, g + 8 at columns 2t, 2t + 1, 2t + 8, 2t + 9; B rows 2t, 2t + 1, 2t + 8, 2t + 9 of column g; C/D rows
    g, g + 8 at columns 2t, 2t + 1)."""
    random = ProbeRandom(seed)
    a_regs, b_regs, c_vals = [], [], []
    for k in range(cases):
        for _ in range(32):
            a_regs.append([random.bf16() | (random.bf16() << 16) for _ in range(4)])
            b_regs.append([random.bf16() | (random.bf16() << 16) for _ in range(2)])
            c_vals.append([0.0 if k == 0 else random.uniform(-8.0, 8.0) for _ in range(4)])
    magnitudes = []
    for k in range(cases):
        A = [[0.0] * 16 for _ in range(16)]
        B = [[0.0] * 8 for _ in range(16)]
        for lane in range(32):
            g, t = lane // 4, lane % 4
            regs = a_regs[k * 32 + lane]
            for r, (row, col) in enumerate([(g, 2 * t), (g + 8, 2 * t), (g, 2 * t + 8), (g + 8, 2 * t + 8)]):
                A[row][col] = bf16_value(regs[r] & 0xFFFF)
                A[row][col + 1] = bf16_value(regs[r] >> 16)
            regs = b_regs[k * 32 + lane]
            for r, row in enumerate([2 * t, 2 * t + 8]):
                B[row][g] = bf16_value(regs[r] & 0xFFFF)
                B[row + 1][g] = bf16_value(regs[r] >> 16)
        for lane in range(32):
            g, t = lane // 4, lane % 4
            c = c_vals[k * 32 + lane]
            outputs = [(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1)]
            magnitudes.append([(sum(abs(A[row][i] * B[i][col]) for i in range(16)) + abs(c[j]),
                                sum(A[row][i] * B[i][col] for i in range(16)) + c[j])
                               for j, (row, col) in enumerate(outputs)])
    return magnitudes  # per line, per output: (sum of the terms' magnitudes, the sum in float64)


def shuffle_undefined_lanes(name):
    """Lanes of a probe shfl case (name shfl.modeM.argA.widthW.maskK) that read a lane outside their member mask,
    by PTX's shfl.sync rules with the c operand CUDA's __shfl*_sync builds for `width`."""
    mode, arg, width, mask_kind = map(int, re.fullmatch(r"shfl\.mode(\d+)\.arg(\d+)\.width(\d+)\.mask(\d+)",
                                                        name).groups())
    segmask = (32 - width) & 31
    clamp = 0 if mode == 1 else 31  # __shfl_up_sync clamps at the segment's first lane, the others at its last
    undefined = set()
    for lane in range(32):
        member = 0xFFFFFFFF if mask_kind == 0 or width >= 32 else ((1 << width) - 1) << (lane // width * width)
        max_lane = (lane & segmask) | (clamp & ~segmask & 31)
        min_lane = lane & segmask
        b = arg & 31
        if mode == 0:
            j = min_lane | (b & ~segmask & 31)
            ok = j <= max_lane
        elif mode == 1:
            j = lane - b
            ok = j >= max_lane
        elif mode == 2:
            j = lane + b
            ok = j <= max_lane
        else:
            j = lane ^ b
            ok = j <= max_lane
        if not ok:
            j = lane
        if not (member >> j) & 1:
            undefined.add(lane)
    return undefined


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
    mma_terms = None
    for (name, index, words, line), (name2, index2, words2, line2) in zip(gpu, emulated):
        fam = family(name)
        s = stats.setdefault(fam, {"lines": 0, "exact": 0, "bounded": 0, "differ": 0, "max_ulp": 0})
        s["lines"] += 1
        if (name, index) != (name2, index2) or len(words) != len(words2):
            s["differ"] += 1
            continue
        if fam == "shfl":
            undefined = shuffle_undefined_lanes(name)
            if undefined and len(words) == 32:
                s.setdefault("undefined_lanes", 0)
                s["undefined_lanes"] += len(undefined)
                words = [w for lane, w in enumerate(words) if lane not in undefined]
                words2 = [w for lane, w in enumerate(words2) if lane not in undefined]
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
                if distance is not None and distance > bound and fam == "mma.m16n8k16.bf16":
                    if mma_terms is None:
                        mma_terms = mma_term_magnitudes()
                    terms, exact = mma_terms[int(index)][i]
                    if abs(exact - as_float(b)) > 2.0 ** -20 * terms:  # the emulator rounds the exact sum once
                        print("the recomputed mma inputs do not give the emulated results: ptx_probe.cu's probe_mma "
                              "changed, update mma_term_magnitudes")
                        return 1
                    if abs(as_float(a) - as_float(b)) <= MMA_RELATIVE_TO_TERMS * terms:
                        s["by_terms"] = s.get("by_terms", 0) + 1
                        s["max_of_terms"] = max(s.get("max_of_terms", 0.0),
                                                abs(as_float(a) - as_float(b)) / terms)
                        continue
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
        if s.get("by_terms"):
            extra += (f" ({s['by_terms']} values within {MMA_RELATIVE_TO_TERMS:.3g} of their terms' magnitude, "
                      f"max {s['max_of_terms']:.3g})")
        if s.get("undefined_lanes"):
            extra += f", {s['undefined_lanes']} undefined lanes not compared"
        print(f"{fam:34s} {s['lines']:5d} lines: {s['exact']} bit-identical{extra}, {s['differ']} differ")
        failed = failed or s["differ"] > 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
