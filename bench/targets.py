#!/usr/bin/env python3
"""targets.py - the issue's performance targets, judged from one run.

    python3 bench/targets.py RUMUS_JSON [--torch COMPARE_JSON] [--table]

RUMUS_JSON is the --json file of one rumus-bench run.  On a CPU device
(PoCL) it judges the CPU targets against the host peers measured in the same
run; with --torch (the compare.json that bench/compare_torch.py writes on a
GPU) it judges the GPU targets against PyTorch measured in the same run.
Prints a markdown table: target, case, measured value, threshold, verdict
(after the table of every result with --table).

Targets (ratios from one run; large = the op's compulsory bytes >= 256 MiB):
  CPU (PoCL): memory-bound ops >= 60% of the host STREAM copy at large sizes
              (rumus-bench times the copy alongside each large case's runs);
              GEMM >= 25% of OpenBLAS sgemm at 2048^3.  Reported without a
              threshold: each conv2d op against its im2col + OpenBLAS sgemm
              peer (the worst and the best case of the run).
  GPU (H200): memory-bound ops >= 90% of the copy kernel's bandwidth at
              large sizes; softmax and log-softmax forward, bias add / grad
              and GELU forward / backward no slower than PyTorch; softmax
              backward <= 0.55x PyTorch's time; fused cross-entropy forward +
              gradient <= 0.35x PyTorch's F.cross_entropy forward + backward
              (<= 0.25x where a row fits in the 48 KiB of local memory of a
              work-group); SGEMM >= 70% of cuBLAS FP32 (TF32 off) at 4096^3;
              the Q8 matrix-vector product (matmul_q8, M = 1) >= 80% of the
              copy kernel's bandwidth on the bytes of B, at its largest
              case.  matmul_q8 has only that target: it is left out of the
              memory-bound rows (its bytes are B's alone).  Attention
              forward and forward + backward, causal and not, no slower
              than PyTorch's F.scaled_dot_product_attention (FP32) at
              T >= 1024.
"""
import argparse
import json
import sys

LARGE = 256 * 2**20
ROW_ON_CHIP = 48 * 1024  # bytes of local memory per work-group (H200 OpenCL)


def _ok(rec):
    return rec.get("status") == "ok"


def _large(run):
    return [r for r in run["results"] if _ok(r) and r["memory_bound"] and r["bytes"] >= LARGE]


# Memory-bound ops judged by their own target, not by the bandwidth rows.
OWN_TARGET = ("matmul_q8",)


def _ops(run, memory_bound=True):
    seen = []
    for r in run["results"]:
        if r["memory_bound"] == memory_bound and r["op"] not in seen \
                and r["op"] not in OWN_TARGET:
            seen.append(r["op"])
    return seen


def _row(target, case, value, threshold, met, note=""):
    return {"target": target, "case": case, "value": value, "threshold": threshold,
            "met": met, "note": note}


def _bandwidth_rows(run, key, limit, label):
    """One row per memory-bound op: its worst large case against the limit."""
    rows = []
    large = _large(run)
    for op in _ops(run):
        cases = [r for r in large if r["op"] == op and r.get(key) is not None]
        if not cases:
            status = [r for r in run["results"] if r["op"] == op]
            why = "n/a in the library" if status and all(r["status"] == "n/a" for r in status) \
                else "no large case measured"
            rows.append(_row(label, op, None, f">= {limit}%", None, why))
            continue
        worst = min(cases, key=lambda r: r[key])
        rows.append(_row(label, f'{op} {worst["shape"]}', f'{worst[key]:.1f}% ({worst["gbs"]:.1f} GB/s)',
                         f">= {limit}%", worst[key] >= limit))
    return rows


def cpu_targets(run):
    rows = _bandwidth_rows(run, "pct_stream", 60,
                           "memory-bound >= 60% of the STREAM copy timed alongside")
    g = [r for r in run["results"] if r["op"] == "gemm" and r["dims"] == [2048, 2048, 2048]
         and not r["trans_a"] and not r["trans_b"]]
    if g and _ok(g[0]) and g[0].get("speed_vs_peer") is not None:
        r = g[0]
        peer = r["flops"] / r["peer_us"] / 1e3
        rows.append(_row("GEMM >= 25% of OpenBLAS", "gemm 2048x2048x2048",
                         f'{100 * r["speed_vs_peer"]:.1f}% (medians {r["gflops"]:.1f} vs {peer:.1f} GFLOP/s)',
                         ">= 25%", r["speed_vs_peer"] >= 0.25))
    else:
        rows.append(_row("GEMM >= 25% of OpenBLAS", "gemm 2048x2048x2048", None, ">= 25%", None,
                         "not measured (gemm n/a, or no OpenBLAS)"))
    for op in ("conv2d_fwd", "conv2d_bwd_data", "conv2d_bwd_weight"):
        cases = [r for r in run["results"] if r["op"] == op and _ok(r)
                 and r.get("speed_vs_peer") is not None]
        if not cases:
            continue
        lo = min(cases, key=lambda r: r["speed_vs_peer"])
        hi = max(cases, key=lambda r: r["speed_vs_peer"])
        rows.append(_row(f"{op} against im2col + OpenBLAS sgemm", f'{op} {lo["shape"]} .. {hi["shape"]}',
                         f'{lo["speed_vs_peer"]:.2f}x .. {hi["speed_vs_peer"]:.2f}x '
                         f'({lo["gflops"]:.1f} .. {hi["gflops"]:.1f} GFLOP/s)', "reported", None,
                         "no target; peer time / rumus time"))
    return rows


def gpu_targets(run, torch_rows):
    rows = _bandwidth_rows(run, "pct_copy", 90,
                           f'memory-bound >= 90% of copy ({run["copy_gbs"]:.0f} GB/s)')
    by_case = {(t["op"], t["shape"]): t for t in torch_rows}

    def ratio_rows(ops, limit, label, pick=lambda r: True, large_only=True):
        out = []
        for op in ops:
            cases = [r for r in run["results"] if r["op"] == op and _ok(r) and pick(r)
                     and (not large_only or r["bytes"] >= LARGE)]
            pairs = []
            for r in cases:
                t = by_case.get((op, r["shape"]))
                if t and t.get("torch_us"):
                    pairs.append((r["rumus_us"] / t["torch_us"], r, t))
            if not pairs:
                out.append(_row(label, op, None, f"<= {limit}x", None, "not measured"))
                continue
            worst = max(pairs, key=lambda p: p[0])
            q, r, t = worst
            out.append(_row(label, f'{op} {r["shape"]}',
                            f'{q:.2f}x ({r["rumus_us"]:.0f} vs {t["torch_us"]:.0f} us)',
                            f"<= {limit}x", q <= limit))
        return out

    rows += ratio_rows(["softmax_fwd", "log_softmax_fwd", "bias_add", "bias_grad", "gelu_fwd",
                        "gelu_bwd"], 1.0, "no slower than PyTorch (large sizes)")
    rows += ratio_rows(["softmax_bwd"], 0.55, "softmax backward <= 0.55x PyTorch")
    rows += ratio_rows(["xent_fwd_bwd"], 0.25, "cross-entropy <= 0.25x (row on chip)",
                       pick=lambda r: r["dims"][-1] * 4 <= ROW_ON_CHIP)
    rows += ratio_rows(["xent_fwd_bwd"], 0.35, "cross-entropy <= 0.35x (row off chip)",
                       pick=lambda r: r["dims"][-1] * 4 > ROW_ON_CHIP)
    rows += ratio_rows(["attention_fwd", "attention_fwd_causal", "attention_fwd_bwd",
                        "attention_fwd_bwd_causal"], 1.0, "attention no slower than SDPA (T >= 1024)",
                       pick=lambda r: r["dims"][2] >= 1024, large_only=False)
    g = [r for r in run["results"] if r["op"] == "gemm" and r["dims"] == [4096, 4096, 4096]
         and not r["trans_a"] and not r["trans_b"]]
    t = by_case.get(("gemm", g[0]["shape"])) if g else None
    if g and _ok(g[0]) and t and t.get("torch_us"):
        q = t["torch_us"] / g[0]["rumus_us"]
        rows.append(_row("SGEMM >= 70% of cuBLAS FP32", "gemm 4096x4096x4096",
                         f'{100 * q:.1f}% ({g[0]["gflops"]:.0f} vs {g[0]["flops"] / t["torch_us"] / 1e3:.0f} GFLOP/s)',
                         ">= 70%", q >= 0.70))
    else:
        rows.append(_row("SGEMM >= 70% of cuBLAS FP32", "gemm 4096x4096x4096", None, ">= 70%", None,
                         "not measured"))
    q8 = [r for r in run["results"] if r["op"] == "matmul_q8" and r["dims"][0] == 1 and _ok(r)
          and r.get("pct_copy") is not None]
    if q8:
        r = max(q8, key=lambda r: r["bytes"])
        rows.append(_row("Q8 matrix-vector >= 80% of copy", f'matmul_q8 {r["shape"]}',
                         f'{r["pct_copy"]:.1f}% ({r["gbs"]:.0f} GB/s of B)', ">= 80%",
                         r["pct_copy"] >= 80))
    else:
        rows.append(_row("Q8 matrix-vector >= 80% of copy", "matmul_q8 M = 1", None, ">= 80%", None,
                         "not measured"))
    return rows


def markdown(rows):
    out = ["| target | case (worst) | measured | threshold | verdict |",
           "|---|---|---|---|---|"]
    for r in rows:
        verdict = "n/a" if r["met"] is None else ("met" if r["met"] else "NOT met")
        value = r["value"] if r["value"] is not None else "-"
        note = f' ({r["note"]})' if r["note"] else ""
        out.append(f'| {r["target"]} | {r["case"]} | {value} | {r["threshold"]} | {verdict}{note} |')
    return "\n".join(out)


def results_table(run):
    """The rumus-bench results as a markdown table (CPU runs: with peers)."""
    cpu = not run["is_gpu"]
    head = "| op | shape | MB | rumus us | GB/s | GFLOP/s | % copy |"
    rule = "|---|---|---:|---:|---:|---:|---:|"
    if cpu:
        head += " % STREAM | peer | peer us | peer time / rumus time |"
        rule += "---:|---|---:|---:|"
    out = [head, rule]
    for r in run["results"]:
        if r["status"] != "ok":
            out.append(f'| {r["op"]} | {r["shape"]} | {r["bytes"] / 1e6:.3f} | {r["status"]} |'
                       + " |" * (7 if cpu else 3))
            continue
        pc = f'{r["pct_copy"]:.0f}' if r.get("pct_copy") is not None else "-"
        line = (f'| {r["op"]} | {r["shape"]} | {r["bytes"] / 1e6:.3f} | {r["rumus_us"]:.1f} | '
                f'{r["gbs"]:.1f} | {r["gflops"]:.1f} | {pc} |')
        if cpu:
            ps = f'{r["pct_stream"]:.0f}' if r.get("pct_stream") is not None else "-"
            if r.get("peer_us"):
                line += f' {ps} | {r["peer"]} | {r["peer_us"]:.1f} | {r["speed_vs_peer"]:.2f} |'
            else:
                line += f" {ps} | - | - | - |"
        out.append(line)
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("rumus_json")
    ap.add_argument("--torch", help="compare.json of bench/compare_torch.py")
    ap.add_argument("--table", action="store_true", help="print the results table first")
    a = ap.parse_args()
    with open(a.rumus_json) as f:
        run = json.load(f)
    if a.table:
        print(results_table(run) + "\n")
    if a.torch:
        with open(a.torch) as f:
            rows = gpu_targets(run, json.load(f)["torch"]["rows"])
    else:
        rows = cpu_targets(run)
    print(markdown(rows))


if __name__ == "__main__":
    sys.exit(main())
