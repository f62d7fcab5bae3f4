#!/usr/bin/env python3
"""Summarise a benchmark's wall times: the table bench-steps.sh and bench-nodes.sh print.

Usage: bench-summary.py RESULTS REPS "MODES" "LENGTHS" UNIT TITLE MODE=LABEL...

RESULTS is a TSV of mode, N, wall time in ns (one line per run). It prints, as Markdown, the
median (min–max) wall time per N and mode, then the marginal cost per UNIT between successive
lengths, (t(N2) − t(N1)) / (N2 − N1), and t(N)/N.
"""
import statistics
import sys

path, reps, modes, lengths, unit, title = sys.argv[1:7]
modes, lengths = modes.split(), [int(n) for n in lengths.split()]
names = dict(a.split("=", 1) for a in sys.argv[7:])
t = {}
for line in open(path):
    mode, n, ns = line.split("\t")
    t.setdefault((mode, int(n)), []).append(int(ns) / 1e6)
med = {k: statistics.median(v) for k, v in t.items()}
print(f"{title}, median of {reps} (ms):\n")
print("| N | " + " | ".join(names[m] for m in modes) + " |")
print("| --- |" + " --- |" * len(modes))
for n in lengths:
    print(f"| {n} | " + " | ".join(f"{med[(m, n)]:.0f} ({min(t[(m, n)]):.0f}–{max(t[(m, n)]):.0f})" for m in modes) + " |")
print(f"\nPer {unit} (ms): marginal (t(N2) − t(N1)) / (N2 − N1), and t(N)/N:\n")
print(f"| per {unit} | " + " | ".join(names[m] for m in modes) + " |")
print("| --- |" + " --- |" * len(modes))
for a, b in zip(lengths, lengths[1:]):
    print(f"| N {a}→{b} | " + " | ".join(f"{(med[(m, b)] - med[(m, a)]) / (b - a):.2f}" for m in modes) + " |")
for n in lengths:
    print(f"| t({n})/{n} | " + " | ".join(f"{med[(m, n)] / n:.2f}" for m in modes) + " |")
