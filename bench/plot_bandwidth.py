#!/usr/bin/env python3
"""plot_bandwidth.py - achieved bandwidth of the memory-bound ops against size.

    python3 bench/plot_bandwidth.py SWEEP_JSON OUT_PNG [--title TEXT]

SWEEP_JSON is the --json file of a rumus-bench run over a range of sizes
(bench/sweep.sh makes one).  Draws GB/s (the op's compulsory bytes over its
median device time) against the op's working set, one line per op, in two
panels (row ops; element-wise and optimizer ops), with the device copy
kernel's bandwidth and, on a CPU device, the host STREAM copy as horizontal
lines, with the target (90% of the copy kernel on a GPU, 60% of STREAM on
a CPU).  Needs matplotlib.
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROW_FAMILIES = ("xent", "softmax")
ROW_OPS = ("bias_add", "bias_grad")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sweep_json")
    ap.add_argument("out_png")
    ap.add_argument("--title")
    a = ap.parse_args()
    with open(a.sweep_json) as f:
        run = json.load(f)
    series = {}
    for r in run["results"]:
        if r["status"] != "ok" or not r["memory_bound"]:
            continue
        series.setdefault(r["op"], []).append((r["bytes"], r["gbs"]))
    if not series:
        print("no measured memory-bound case in " + a.sweep_json, file=sys.stderr)
        return 1
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2), sharey=True)
    groups = [("rows: cross-entropy, softmax, bias", lambda op: op in ROW_OPS or any(
                  op.startswith(p) or op.startswith("log_" + p) for p in ROW_FAMILIES)),
              ("element-wise, activations, optimizers", None)]
    markers = "os^vD<>phx*+"
    for ax, (title, test) in zip(axes, groups):
        ops = [op for op in series if (test(op) if test else not groups[0][1](op))]
        for i, op in enumerate(ops):
            pts = sorted(series[op])
            ax.plot([b / 2**20 for b, _ in pts], [g for _, g in pts], marker=markers[i % len(markers)],
                    markersize=4, linewidth=1.2, label=op)
        ax.axhline(run["copy_gbs"], color="black", linestyle="--", linewidth=1,
                   label=f'device copy kernel {run["copy_gbs"]:.0f} GB/s')
        if run["is_gpu"]:
            ax.axhline(0.9 * run["copy_gbs"], color="green", linestyle=":", linewidth=1,
                       label="target: 90% of the copy kernel")
        else:
            ax.axhline(run["stream_gbs"], color="grey", linestyle=":", linewidth=1.2,
                       label=f'host STREAM copy {run["stream_gbs"]:.1f} GB/s')
            ax.axhline(0.6 * run["stream_gbs"], color="green", linestyle=":", linewidth=1,
                       label="target: 60% of STREAM copy")
        ax.axvline(256, color="red", linestyle=":", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("working set (MiB, compulsory bytes of the op); red: 256 MiB")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    axes[0].set_ylabel("achieved GB/s (median device time)")
    fig.suptitle(a.title or f'rumus memory-bound ops on {run["device"]} ({run["date"]})', fontsize=11)
    fig.tight_layout()
    fig.savefig(a.out_png, dpi=110)
    print("wrote " + a.out_png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
