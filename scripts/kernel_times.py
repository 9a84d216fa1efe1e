#!/usr/bin/env python3
"""Sums Nsight Compute's per-kernel durations (`ncu --metrics gpu__time_duration.sum --csv`) by kernel name.

    python3 scripts/kernel_times.py profile.csv

Prints one line per kernel name, largest total first: total microseconds, share, launches, mean microseconds.
"""
import collections
import csv
import sys


def main():
    rows = []
    with open(sys.argv[1], newline="") as f:
        lines = [line for line in f if line.startswith('"')]  # the CSV part (ncu also prints ==PROF== lines)
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "nsecond")
        scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6}.get(unit, 1e-3)
        rows.append((row["Kernel Name"].split("(")[0], value * scale))
    total = sum(t for _, t in rows) or 1.0
    by_name = collections.defaultdict(list)
    for name, t in rows:
        by_name[name].append(t)
    print(f"{len(rows)} kernels, {total:.0f} us")
    for name, times in sorted(by_name.items(), key=lambda kv: -sum(kv[1])):
        print(f"{sum(times):10.1f} us {100 * sum(times) / total:5.1f} % {len(times):5d} x {sum(times) / len(times):8.2f} us"
              f"  {name[:90]}")


if __name__ == "__main__":
    main()
